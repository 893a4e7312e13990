// Lighthouse (12.2.3) over the portal's views as a signed-in user sees them, on a running local stack: performance,
// accessibility and best practices per view, desktop. Debian's chromium, driven by Lighthouse's own puppeteer-core.
//   npm ci && node benchmarks/portal_lighthouse.mjs [BASE]   (lighthouse is a dev dependency of the root
//   package.json; BASE: the stack's URL, default http://127.0.0.1:8003; the dev issuer's login page signs in as ada,
//   admin of LIGHTHOUSE_SUB, default sub-123: seed it with nodes and jobs first for figures worth reading;
//   VIEWS=#/overview,#/jobs picks views)
// Prints one line per view; exits 1 when accessibility or best practices is below 100 or performance below 95.
import puppeteer from 'puppeteer-core';
import { startFlow, desktopConfig } from 'lighthouse';

const BASE = (process.argv[2] || process.env.BASE || 'http://127.0.0.1:8003').replace(/\/$/, '');
const SUB = process.env.LIGHTHOUSE_SUB || 'sub-123';
const VIEWS = (process.env.VIEWS || '#/overview,#/nodes,#/jobs,#/costs,#/usage,#/activity').split(',');

const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-gpu'],
});
const [page] = await browser.pages(); // the browser's one tab: a second one would not be in the foreground (Lighthouse: NO_FCP)
await page.goto(`${BASE}/portal/#/overview`);
await (await page.waitForSelector('button ::-p-text(Sign in)')).click();
await page.waitForSelector('input[name=subject], #subject, input');
// the dev issuer's login page: user, roles, scopes
await page.evaluate((sub) => {
  const byLabel = (text) => [...document.querySelectorAll('label')].find((l) => l.textContent.trim().startsWith(text));
  const input = (text) => document.getElementById(byLabel(text).htmlFor) || byLabel(text).querySelector('input,textarea');
  input('User (subject)').value = 'ada';
  for (const box of document.querySelectorAll('input[type=checkbox]')) box.checked = box.value === 'itl-accelerator-admin' || (box.labels[0] && box.labels[0].textContent.includes('itl-accelerator-admin'));
  input('Subscription scopes').value = `/subscriptions/${sub}`;
}, SUB);
await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
await page.waitForSelector('.who-name');

const flow = await startFlow(page, { config: desktopConfig, flags: { onlyCategories: ['performance', 'accessibility', 'best-practices'], disableStorageReset: true } });
for (const view of VIEWS) {
  await page.goto('about:blank'); // a load, not a same-document hash change (which paints nothing new: NO_FCP)
  await flow.navigate(`${BASE}/portal/${view}`, { name: view });
}
const { steps } = await flow.createFlowResult();
let failed = false;
for (const step of steps) {
  if (step.lhr.runtimeError) console.log(step.name, step.lhr.runtimeError.code, step.lhr.runtimeError.message);
  const c = step.lhr.categories;
  const score = (k) => Math.round((c[k].score || 0) * 100);
  const line = `${step.name.padEnd(12)} performance ${score('performance')}  accessibility ${score('accessibility')}  best practices ${score('best-practices')}`;
  failed ||= score('accessibility') < 100 || score('best-practices') < 100 || score('performance') < 95;
  const misses = Object.values(step.lhr.audits).filter((a) => a.score !== null && a.score < 1 && a.scoreDisplayMode === 'binary').map((a) => a.id);
  console.log(line + (misses.length ? `  (not passed: ${misses.join(', ')})` : ''));
}
await browser.close();
process.exit(failed ? 1 : 0);
