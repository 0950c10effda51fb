// The official openai SDK against a running `vdpp serve` of a Wan image-to-video model
// (builtin-wan-i2v, started by TestOpenAISDKWanI2V): videos.create with a prompt and an
// input_reference returns a video that completes and downloads as an MP4; a create without
// input_reference or without a prompt is a 400 naming the field.
// Usage: node sdk_i2v.mjs BASE_URL IMAGE.png MODEL
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI, { toFile } from 'openai';

const [base, imagePath, model] = process.argv.slice(2);
const png = readFileSync(imagePath);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 2 });
const image = () => toFile(png, 'in.png', { type: 'image/png' });
const small = { size: '48x32', seconds: '1', num_inference_steps: 2, fps: 4 };
const checks = [];
const check = (name) => { checks.push(name); console.log('ok -', name); };

async function poll(id) {
  for (let i = 0; i < 6000; i++) {
    const v = await client.videos.retrieve(id);
    if (v.status === 'completed' || v.status === 'failed') return v;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('video ' + id + ' never finished');
}

async function expectBadRequest(param, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof OpenAI.BadRequestError, `want BadRequestError, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, 400);
    assert.equal(e.param, param, e.message);
    return e;
  }
  throw new Error('want a 400, got success');
}

const v = await client.videos.create({ model, prompt: 'an arrow flies to the right', input_reference: await image(), ...small });
assert.match(v.id, /^video_[0-9a-f]+$/);
const done = await poll(v.id);
assert.equal(done.status, 'completed', JSON.stringify(done.error));
check('create with prompt and input_reference: ' + done.status);

const content = await client.videos.downloadContent(v.id);
const mp4 = Buffer.from(await content.arrayBuffer());
assert.ok(mp4.length > 100);
assert.equal(mp4.subarray(4, 8).toString(), 'ftyp');
check(`content: an MP4 of ${mp4.length} bytes`);

let e = await expectBadRequest('input_reference', async () => client.videos.create({ model, prompt: 'no image', ...small }));
assert.match(e.message, /input_reference is required/);
check('no input_reference: 400 naming it: ' + e.message);
e = await expectBadRequest('prompt', async () => client.videos.create({ model, prompt: ' ', input_reference: await image(), ...small }));
check('empty prompt: 400 naming it: ' + e.message);

console.log(`${checks.length} passed, 0 failed`);
