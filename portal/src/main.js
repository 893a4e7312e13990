// The portal's entry: read config.json, complete or start the login, then run the shell.
import { Auth } from './auth.js';
import './app.js';

async function boot() {
  const root = document.getElementById('boot');
  try {
    const response = await fetch('./config.json', { cache: 'no-store' });
    if (!response.ok) throw new Error(`config.json: HTTP ${response.status}`);
    const config = await response.json();
    const auth = new Auth(config);
    const app = document.createElement('itl-app');
    app.config = config;
    app.auth = auth;
    let loginError = null;
    try {
      await auth.start();
    } catch (err) {
      loginError = err;
    }
    app.loginError = loginError;
    root.replaceWith(app);
  } catch (err) {
    root.innerHTML = '';
    const p = document.createElement('p');
    p.className = 'error';
    p.setAttribute('role', 'alert');
    p.textContent = `The portal could not start: ${err.message}`;
    root.append(p);
  }
}

window.addEventListener('error', (e) => showFatal(e.message));
window.addEventListener('unhandledrejection', (e) => showFatal((e.reason && e.reason.message) || String(e.reason)));

function showFatal(message) {
  // A visible error instead of a blank page, whatever broke.
  let bar = document.getElementById('fatal');
  if (!bar) {
    bar = document.createElement('div');
    bar.id = 'fatal';
    bar.className = 'error fatal';
    bar.setAttribute('role', 'alert');
    document.body.prepend(bar);
  }
  bar.textContent = `Something went wrong: ${message}`;
}

boot();
