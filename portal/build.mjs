// Builds the portal into dist/: one ES module bundle (esbuild) beside index.html, the stylesheets and uPlot's CSS.
// config.json is not built: whoever serves dist/ provides it (the local stack, or the deployment step).
import { build } from 'esbuild';
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';

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
  logLevel: 'warning',
});
await copyFile('src/index.html', new URL('index.html', out));
await copyFile('src/styles.css', new URL('styles.css', out));
await copyFile('node_modules/uplot/dist/uPlot.min.css', new URL('uPlot.min.css', out));
await writeFile(new URL('BUILT', out), `${new Date().toISOString()}\n`);
console.log('portal built into portal/dist/');
