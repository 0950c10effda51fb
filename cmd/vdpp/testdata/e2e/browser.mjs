// The web page in Debian's headless Chromium (playwright-core, no browser download),
// against a running `vdpp serve` with an API token (started by TestWebPage): ask for the
// token, pick an image, set the parameters, submit, watch the progress bar, see the video
// play, download it, cancel a second job (held running by the server's hold file), and
// save a screenshot.
// Usage: node browser.mjs BASE_URL IMAGE.png TOKEN SCREENSHOT.png HOLD_FILE
import assert from 'node:assert/strict';
import { unlinkSync, writeFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const [base, imagePath, token, shot, hold] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const checks = [];
const check = (name) => { checks.push(name); console.log('ok -', name); };
try {
  const page = await browser.newPage({ viewport: { width: 1180, height: 720 }, acceptDownloads: true });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(base + '/');

  // The server has a token: the page asks for it once.
  await page.waitForSelector('#token-dialog[open]');
  await page.fill('#token', token);
  await page.click('#token-dialog button');
  await page.waitForFunction(() => document.getElementById('model').textContent !== '');
  check('asks for the token, shows the model: ' + await page.textContent('#model'));

  // Pick the image, set the parameters, submit.
  await page.setInputFiles('#image', imagePath);
  await page.waitForSelector('#preview:not([hidden])');
  await page.fill('#prompt', 'a ball rolls');
  await page.fill('#seconds', '1');
  await page.fill('#steps', '2');
  // The step cache field offers the served model's modes (its knob table's choices); the
  // first job runs one.
  const modes = await page.evaluate(async (tok) => {
    const r = await fetch('/v1/models', { headers: { Authorization: 'Bearer ' + tok } });
    return (await r.json()).data[0].vdpp_limits.knobs.find((k) => k.name === 'cache').choices;
  }, token);
  assert.ok(modes.includes('deepcache'), 'the built-in model offers deepcache: ' + modes);
  assert.deepEqual(await page.$$eval('#cache option', (os) => os.map((o) => o.value)), ['', ...modes]);
  await page.click('#cache-box summary');
  await page.selectOption('#cache', 'deepcache');
  check('step cache field: ' + modes.join(', '));
  await page.click('#submit');
  const card = page.locator('li.job').first();
  await card.waitFor();
  check('submitted: ' + await card.getAttribute('data-id'));

  // Watch it run to the end (the progress bar moves over the event stream), then play.
  await page.waitForFunction(() => {
    const v = document.querySelector('li.job video');
    return v && v.readyState >= 2 && v.currentTime > 0;
  }, null, { timeout: 240000, polling: 100 });
  check('the video plays inline');
  assert.match(await card.locator('.status').textContent(), /completed/);

  // Download it.
  const [download] = await Promise.all([page.waitForEvent('download'), card.locator('a.download').click()]);
  assert.match(download.suggestedFilename(), /^video_[0-9a-f]+\.mp4$/);
  check('download ' + download.suggestedFilename());

  // A second job is cancelled from its card. The server holds every job at its first step
  // while the hold file exists (vdpp serve --test-hold-file), so the job is running when
  // the screenshot is taken and the cancel clicked, and the card shows "cancelling…" until
  // the hold is lifted, however fast the machine.
  writeFileSync(hold, '');
  await page.fill('#size', '128x128');
  await page.fill('#steps', '10');
  await page.selectOption('#cache', '');
  await page.click('#submit');
  await page.waitForFunction(() => document.querySelectorAll('li.job').length === 2);
  // Its progress bar moved over the event stream; the screenshot shows it running.
  await page.waitForFunction(() => {
    const li = document.querySelector('li.job');
    return /running [1-9]/.test(li.querySelector('.status').textContent) && li.querySelector('progress').value > 0;
  }, null, { timeout: 120000, polling: 50 });
  check('progress: ' + await page.locator('li.job .status').first().textContent());
  await page.evaluate(() => document.querySelector('li.job video').pause());
  await page.screenshot({ path: shot });
  const second = page.locator('li.job').first();
  await second.locator('button.danger').click();
  // The card says so at once; the job cannot end while it is held.
  await page.waitForFunction(() => document.querySelector('li.job .status').textContent === 'cancelling…',
    null, { timeout: 10000, polling: 20 });
  check('shows the cancel at once: ' + await second.locator('.status').textContent());
  assert.equal(await second.locator('.status').textContent(), 'cancelling…');
  // Lifted, the job ends cancelled at the worker's next chance.
  unlinkSync(hold);
  await page.waitForFunction(() => {
    const li = document.querySelector('li.job');
    return li.querySelector('.status').textContent === 'failed' && li.querySelector('.meta').textContent.includes('cancelled');
  }, null, { timeout: 60000 });
  check('cancel');
  assert.match(await page.textContent('#counts'), /1 done · 1 failed/);
  check('job list: ' + await page.textContent('#counts'));

  assert.deepEqual(errors, []);
  check('no page errors');
  console.log(`${checks.length} passed, 0 failed`);
} finally {
  await browser.close();
}
