// The web page in Debian's headless Chromium (playwright-core) against a running
// `vdpp serve` of a text-to-video (Wan) folder (started by TestWebPagePrompt): the page
// shows a prompt and a negative prompt instead of the image, refuses an empty prompt,
// shows the server's message for a window the model cannot cut, and runs a prompt job
// (a long video of two windows) to the end.
// Usage: node browser_prompt.mjs BASE_URL SIZE STEPS FRAMES WINDOW OVERLAP [SCREENSHOT.png]
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const [base, size, steps, frames, window, overlap, shot] = process.argv.slice(2);
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
  const creates = [];
  page.on('request', (r) => { if (r.method() === 'POST' && r.url().endsWith('/v1/videos')) creates.push(r.postData() || ''); });
  await page.goto(base + '/');
  await page.waitForFunction(() => document.getElementById('model').textContent !== '');

  // A text model: no image, a required prompt and a negative prompt, found by their labels.
  assert.equal(await page.isVisible('#drop'), false);
  const prompt = page.getByLabel('Prompt', { exact: false }).first();
  assert.equal(await prompt.getAttribute('id'), 'prompt');
  assert.equal(await prompt.isVisible(), true);
  assert.equal(await page.getByLabel('Negative prompt').isVisible(), true);
  assert.match(await page.textContent('#prompt-note'), /required/);
  check('text model: prompt and negative prompt shown, image hidden');

  // An empty prompt is refused on the page.
  await page.fill('#size', size);
  await page.fill('#steps', steps);
  await page.click('#submit');
  assert.match(await page.textContent('#form-error'), /Type a prompt/);
  check('empty prompt refused');

  // The server's validation message is shown as it is: a window Wan's causal VAE cannot take.
  await page.fill('#prompt', 'a red ball rolls on the grass');
  await page.fill('#negative-prompt', 'blurry');
  await page.click('#long summary');
  await page.fill('#num-frames', frames);
  await page.fill('#window', String(Number(window) + 1));
  await page.fill('#overlap', overlap);
  await page.click('#submit');
  await page.waitForFunction(() => document.getElementById('form-error').textContent !== '');
  const msg = await page.textContent('#form-error');
  assert.match(msg, /window .*1 \+ 4k/);
  assert.equal(await page.locator('li.job').count(), 0);
  check('server message shown: ' + msg);

  // A long prompt job (two windows) runs to the end.
  await page.fill('#window', window);
  await page.selectOption('#blend', 'linear');
  await page.click('#submit');
  const card = page.locator('li.job').first();
  await card.waitFor();
  assert.equal(await page.textContent('#form-error'), '');
  check('submitted: ' + await card.getAttribute('data-id'));
  await page.waitForFunction(() => {
    const li = document.querySelector('li.job');
    return li && /completed|failed/.test(li.querySelector('.status').textContent) && li.querySelector('video, img.result');
  }, null, { timeout: 120000, polling: 100 });
  assert.match(await card.locator('.status').textContent(), /completed/);
  assert.match(await card.locator('.meta').textContent(), /a red ball rolls on the grass/);
  check('completed: ' + await card.locator('.meta').textContent());

  // The job carries the prompt's parameters.
  const id = (await card.getAttribute('data-id')).replace(/^video_/, '');
  const st = await page.evaluate(async (id) => (await fetch('/v1/videos/' + id)).json(), id);
  assert.equal(st.params.num_frames, Number(frames));
  assert.equal(st.params.window, Number(window));
  assert.equal(st.params.overlap, Number(overlap));
  assert.equal(st.params.blend, 'linear');
  assert.equal(st.params.steps, Number(steps));
  const sent = creates.at(-1);
  assert.match(sent, /name="negative_prompt"\r\n\r\nblurry\r\n/);
  assert.doesNotMatch(sent, /input_reference/);
  check(`params (negative prompt sent, no image): ${st.params.num_frames} frames, window ${st.params.window}, overlap ${st.params.overlap}, ${st.params.blend}`);

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
