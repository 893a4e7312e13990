// Builds the portal into dist/: one ES module bundle (esbuild) beside index.html, the stylesheets and uPlot's CSS.
// config.json is not built: whoever serves dist/ provides it (the local stack, or the deployment step).
import { build } from 'esbuild';
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';

// The accelerator kinds the forms offer are the API's: the `kind` examples of its OpenAPI document (docs/openapi.json,
// which ./dev generate writes from the API's models and a test keeps current), as ACCELERATOR_KINDS (src/ui.js KINDS).
const openapi = JSON.parse(await readFile(new URL('../docs/openapi.json', import.meta.url), 'utf8'));
const kinds = openapi.components.schemas.JobAccelerator?.properties?.kind?.examples;
if (!Array.isArray(kinds) || kinds.length === 0 || !kinds.every((k) => typeof k === 'string')) {
  throw new Error("docs/openapi.json: JobAccelerator's kind has no examples (the accelerator kinds the API knows)");
}

const out = new URL('./dist/', import.meta.url);
await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
await build({
  entryPoints: ['src/main.js'],
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  minify: true,
  sourcemap: false, // none published (a 963 KB map served beside the app): the bundle is built from this repository
  outfile: 'dist/app.js',
  define: { ACCELERATOR_KINDS: JSON.stringify(kinds) },
  logLevel: 'warning',
});
await copyFile('src/index.html', new URL('index.html', out));
await copyFile('src/styles.css', new URL('styles.css', out));
await copyFile('node_modules/uplot/dist/uPlot.min.css', new URL('uPlot.min.css', out));
await writeFile(new URL('BUILT', out), `${new Date().toISOString()}\n`);
console.log('portal built into portal/dist/');
