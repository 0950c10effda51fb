// The official openai SDK against a running `vdpp serve` (synthetic model, started by
// TestOpenAISDK with --nproc 1 --max-running 1 --max-queue 1 --step-ms 20): the whole
// Videos API flow, its typed errors and a 429 retried by the SDK.
// Usage: node sdk.mjs BASE_URL IMAGE.png TOKEN MODEL
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI, { toFile } from 'openai';

const [base, imagePath, token, model] = process.argv.slice(2);
const png = readFileSync(imagePath);
let status429 = 0;
const client = new OpenAI({
  baseURL: base + '/v1',
  apiKey: token,
  maxRetries: 8,
  // Count the 429s the SDK sees (it retries them after Retry-After).
  fetch: async (url, init) => {
    const r = await fetch(url, init);
    if (r.status === 429) status429++;
    return r;
  },
});
const image = () => toFile(png, 'in.png', { type: 'image/png' });
const small = { size: '32x32', seconds: '1', num_inference_steps: 3, fps: 4 };

async function poll(id) {
  for (let i = 0; i < 2000; i++) {
    const v = await client.videos.retrieve(id);
    if (v.status === 'completed' || v.status === 'failed') return v;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('video ' + id + ' never finished');
}

async function expectError(cls, status, param, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof cls, `want ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    if (param !== undefined) assert.equal(e.param, param, e.message);
    assert.ok(e.message.length > 0);
    return e;
  }
  throw new Error(`want ${cls.name}, got success`);
}

const checks = [];
const check = (name) => checks.push(name);

// Models.
const models = await client.models.list();
assert.deepEqual(models.data.map((m) => m.id), [model]);
check('models.list');

// Create with an image file, poll to completed.
const created = await client.videos.create({ model, prompt: 'a ball rolls', input_reference: await image(), ...small });
assert.match(created.id, /^video_[0-9a-f]+$/);
assert.equal(created.object, 'video');
assert.equal(created.model, model);
assert.equal(created.size, '32x32');
assert.equal(created.seconds, '1');
assert.equal(created.prompt, 'a ball rolls');
assert.ok(['queued', 'in_progress'].includes(created.status));
const done = await poll(created.id);
assert.equal(done.status, 'completed');
assert.equal(done.progress, 100);
assert.equal(done.error, null);
assert.equal(done.remixed_from_video_id, null);
assert.ok(done.completed_at >= done.created_at);
assert.ok(done.expires_at > done.completed_at);
check('create + retrieve to completed');

// Download: an MP4 (ftyp box), a PNG thumbnail, a JPEG sprite sheet.
const mp4 = Buffer.from(await (await client.videos.downloadContent(created.id)).arrayBuffer());
assert.equal(mp4.subarray(4, 8).toString('latin1'), 'ftyp');
const thumb = Buffer.from(await (await client.videos.downloadContent(created.id, { variant: 'thumbnail' })).arrayBuffer());
assert.deepEqual([...thumb.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
const sheet = Buffer.from(await (await client.videos.downloadContent(created.id, { variant: 'spritesheet' })).arrayBuffer());
assert.deepEqual([...sheet.subarray(0, 2)], [0xff, 0xd8]);
check('downloadContent video/thumbnail/spritesheet');
if (process.env.SDK_MP4_OUT) (await import('node:fs')).writeFileSync(process.env.SDK_MP4_OUT, mp4);

// input_reference as a data: URL (the SDK sends input_reference[image_url]).
const byURL = await client.videos.create({
  model, prompt: 'from a data URL', ...small,
  input_reference: { image_url: 'data:image/png;base64,' + png.toString('base64') },
});
assert.equal((await poll(byURL.id)).status, 'completed');
check('create with image_url');

// Typed errors.
await expectError(OpenAI.NotFoundError, 404, 'model', async () =>
  client.videos.create({ model: 'sora-2', prompt: 'x', input_reference: await image(), ...small }));
await expectError(OpenAI.BadRequestError, 400, 'size', async () =>
  client.videos.create({ model, prompt: 'x', input_reference: await image(), ...small, size: '1792x1024' }));
await expectError(OpenAI.BadRequestError, 400, 'input_reference', () =>
  client.videos.create({ model, prompt: 'no image', ...small }));
await expectError(OpenAI.NotFoundError, 404, undefined, () => client.videos.retrieve('video_0123456789abcdef0123'));
await expectError(OpenAI.AuthenticationError, 401, undefined, () =>
  new OpenAI({ baseURL: base + '/v1', apiKey: 'wrong', maxRetries: 0 }).videos.list());
check('typed errors: bad model, bad size, missing image, unknown id, bad token');

// 429: one long job runs, one waits (--max-queue 1): the next create is refused with
// Retry-After and the SDK retries it until the queue has room.
const long = await client.videos.create({ model, prompt: 'long', input_reference: await image(), ...small, num_inference_steps: 40 });
const waiting = await client.videos.create({ model, prompt: 'waits', input_reference: await image(), ...small });
const retried = await client.videos.create({ model, prompt: 'retried', input_reference: await image(), ...small });
assert.ok(status429 >= 1, 'the SDK saw no 429');
for (const v of [long, waiting, retried]) assert.equal((await poll(v.id)).status, 'completed');
check(`429 retried by the SDK (${status429} refusals)`);

// Auto-pagination over pages of 2, newest first: every video made above, once.
const all = [];
for await (const v of client.videos.list({ limit: 2 })) all.push(v.id);
const made = [retried, waiting, long, byURL, created].map((v) => v.id);
assert.deepEqual(all, made);
const asc = [];
for await (const v of client.videos.list({ limit: 3, order: 'asc' })) asc.push(v.id);
assert.deepEqual(asc, [...made].reverse());
check('list auto-pagination (desc and asc)');

// Delete: the video is gone.
const del = await client.videos.delete(created.id);
assert.deepEqual(del, { id: created.id, object: 'video.deleted', deleted: true });
await expectError(OpenAI.NotFoundError, 404, undefined, () => client.videos.retrieve(created.id));
await expectError(OpenAI.NotFoundError, 404, undefined, () => client.videos.downloadContent(created.id));
check('delete');

for (const c of checks) console.log('ok -', c);
console.log(`${checks.length} passed, 0 failed`);
