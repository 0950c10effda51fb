// The web page in Debian's headless Chromium (playwright-core) against a running
// `vdpp serve` of a Wan image-to-video model (builtin-wan-i2v, started by
// TestWebPageWanI2V): the page shows the image field and the prompt (both required) and the
// negative prompt, refuses a job without the image, and runs one with an image and a prompt
// to the end, sending both.
// Usage: node browser_i2v.mjs BASE_URL IMAGE.png [SCREENSHOT.png]
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const [base, imagePath, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const checks = [];
const check = (name) => { checks.push(name); console.log('ok -', name); };
try {
  const page = await browser.newPage({ viewport: { width: 1180, height: 720 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // What the page's creates send: each FormData's fields (a file as its name), recorded by
  // wrapping fetch (Chromium does not show a multipart body with a file to the driver).
  await page.addInitScript(() => {
    window.__creates = [];
    const f = window.fetch;
    window.fetch = (url, init) => {
      if (init && init.method === 'POST' && init.body instanceof FormData) {
        window.__creates.push(Object.fromEntries([...init.body.entries()].map(([k, v]) => [k, v instanceof File ? 'file:' + v.name : v])));
      }
      return f(url, init);
    };
  });
  await page.goto(base + '/');
  await page.waitForFunction(() => document.getElementById('model').textContent !== '');

  // An image-and-prompt model: the image, a required prompt and a negative prompt.
  assert.equal(await page.isVisible('#drop'), true);
  assert.match(await page.textContent('#drop-text'), /required/);
  assert.equal(await page.getByLabel('Negative prompt').isVisible(), true);
  assert.match(await page.textContent('#prompt-note'), /required/);
  check('image-to-video model: image, prompt and negative prompt shown');

  // Without the image the page refuses.
  await page.fill('#prompt', 'an arrow flies to the right');
  await page.fill('#size', '48x32');
  await page.fill('#steps', '2');
  await page.fill('#seconds', '0.5');
  await page.click('#submit');
  assert.match(await page.textContent('#form-error'), /Pick an image/);
  check('no image refused');

  // With the image the job runs to the end.
  await page.setInputFiles('#image', imagePath);
  await page.fill('#negative-prompt', 'blurry');
  await page.click('#submit');
  const card = page.locator('li.job').first();
  await card.waitFor();
  assert.equal(await page.textContent('#form-error'), '');
  await page.waitForFunction(() => {
    const li = document.querySelector('li.job');
    return li && /completed|failed/.test(li.querySelector('.status').textContent) && li.querySelector('video, img.result');
  }, null, { timeout: 120000, polling: 100 });
  assert.match(await card.locator('.status').textContent(), /completed/);
  check('completed: ' + await card.locator('.meta').textContent());
  const sent = (await page.evaluate(() => window.__creates)).at(-1);
  assert.match(sent.input_reference, /^file:/);
  assert.equal(sent.prompt, 'an arrow flies to the right');
  assert.equal(sent.negative_prompt, 'blurry');
  check('sent the image, the prompt and the negative prompt');

  if (shot) {
    await page.waitForFunction(() => { const v = document.querySelector('li.job video'); return !v || v.readyState >= 2; });
    await page.evaluate(() => { const v = document.querySelector('li.job video'); if (v) v.pause(); window.scrollTo(0, 0); });
    await page.screenshot({ path: shot });
  }
  assert.deepEqual(errors, []);
  check('no page errors');
  console.log(`${checks.length} passed, 0 failed`);
} finally {
  await browser.close();
}
