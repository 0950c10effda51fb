// The vdpp web page: create jobs through the OpenAI Videos API, follow them over the
// native event stream, show and download the results. No framework, no build step.
'use strict';

const $ = (id) => document.getElementById(id);
const state = {
  token: localStorage.getItem('vdpp-token') || '',
  model: '',
  input: 'image',       // what a job gives the served model: 'image' or 'text' (its vdpp_limits.input)
  image: 'required',    // whether it takes an image: 'required', 'optional' or 'none' (vdpp_limits.image)
  lastImage: 'none',    // whether it takes a last image (vdpp_limits.last_image)
  imageField: 'input_reference', // the OpenAI create's image field (vdpp_limits.inputs)
  jobs: new Map(),      // id -> OpenAI video object
  following: new Set(), // ids with an open event stream
  media: new Map(),     // id -> object URL of the MP4
  tokenAsk: null,       // the pending token prompt
};
const FINAL = new Set(['completed', 'failed']);

// api fetches path with the bearer token; on 401 it asks for the token and retries.
async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  const r = await fetch(path, Object.assign({}, opts, { headers }));
  if (r.status === 401) {
    await askToken();
    return api(path, opts);
  }
  return r;
}

// body decodes a JSON answer and throws the API's error message when it is not 2xx.
async function body(r) {
  const b = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = b.error;
    throw new Error((e && (e.message || e)) || r.status + ' ' + r.statusText);
  }
  return b;
}

function askToken() {
  if (!state.tokenAsk) {
    state.tokenAsk = new Promise((resolve) => {
      const d = $('token-dialog');
      $('token').value = state.token;
      d.addEventListener('close', () => {
        state.token = $('token').value.trim();
        localStorage.setItem('vdpp-token', state.token);
        state.tokenAsk = null;
        resolve();
      }, { once: true });
      d.showModal();
    });
  }
  return state.tokenAsk;
}

const nativeID = (id) => id.replace(/^video_/, '');

// ---- the form ----

function setImage(file) {
  if (!file) return;
  const dt = new DataTransfer();
  dt.items.add(file);
  $('image').files = dt.files;
  showPreview(file);
}

function showPreview(file) {
  const img = $('preview');
  img.src = URL.createObjectURL(file);
  img.hidden = false;
  $('drop-text').textContent = file.name;
}

function initForm() {
  const drop = $('drop');
  $('image').addEventListener('change', () => { if ($('image').files[0]) showPreview($('image').files[0]); });
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    setImage(e.dataTransfer.files[0]);
  });
  $('create').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('form-error').textContent = '';
    const text = state.input === 'text';
    const file = $('image').files[0];
    const prompt = $('prompt').value.trim();
    if (state.lastImage === 'required') {
      $('form-error').textContent = 'The served model needs a last image too, which this page cannot send: use the API.';
      return;
    }
    if (state.image === 'required' && !file) { $('form-error').textContent = 'Pick an image first.'; return; }
    if (text && !prompt) { $('form-error').textContent = 'Type a prompt first.'; return; }
    const fd = new FormData();
    if (state.model) fd.append('model', state.model);
    fd.append('prompt', prompt);
    if (text) {
      const neg = $('negative-prompt').value.trim();
      if (neg) fd.append('negative_prompt', neg);
    }
    if (file && state.image !== 'none') fd.append(state.imageField || 'input_reference', file, file.name);
    const frames = $('num-frames');
    for (const el of $('create').querySelectorAll('.grid input, .grid select')) {
      if (el.closest('[hidden]')) continue; // a field that does not apply (another cache mode's)
      if (el.name === 'seconds' && frames && frames.value.trim() !== '') continue; // Frames overrides Seconds
      if (el.type === 'checkbox') {
        if (el.checked) fd.append(el.name, 'true');
      } else if (el.value.trim() !== '') {
        fd.append(el.name, el.value.trim());
      }
    }
    $('submit').disabled = true;
    try {
      const v = await body(await api('/v1/videos', { method: 'POST', body: fd }));
      upsert(v);
      follow(v.id);
    } catch (err) {
      $('form-error').textContent = err.message;
    } finally {
      $('submit').disabled = false;
    }
  });
  $('token-btn').addEventListener('click', () => askToken().then(refresh));
}

// ---- jobs ----

function upsert(v) {
  state.jobs.set(v.id, v);
  render(v);
  counts();
}

function counts() {
  const n = { queued: 0, in_progress: 0, completed: 0, failed: 0 };
  for (const v of state.jobs.values()) n[v.status]++;
  $('counts').textContent = `${n.queued} queued · ${n.in_progress} running · ${n.completed} done · ${n.failed} failed`;
  $('empty').hidden = state.jobs.size > 0;
}

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  e.append(...kids);
  return e;
}

// render creates or updates the card of video v (the media element is kept once made).
function render(v) {
  let li = document.querySelector(`li[data-id="${v.id}"]`);
  if (!li) {
    li = el('li', { class: 'job', 'data-id': v.id },
      el('div', { class: 'top' }, el('span', { class: 'id', title: v.id }, v.id), el('span', { class: 'status' })),
      el('progress', { max: '100', value: '0' }),
      el('div', { class: 'media' }),
      el('div', { class: 'meta' }),
      el('div', { class: 'actions' }));
    // Newest first.
    const list = $('jobs');
    const after = [...list.children].find((c) => (state.jobs.get(c.dataset.id) || {}).created_at < v.created_at);
    list.insertBefore(li, after || null);
  }
  const st = li.querySelector('.status');
  // A cancel shows at once: the worker stops the job at its next chance.
  const cancelling = v.cancelling && !FINAL.has(v.status);
  st.textContent = cancelling ? 'cancelling…' : v.status === 'in_progress' ? `running ${v.progress}%` : v.status;
  st.className = 'status ' + (cancelling ? 'cancelling' : v.status);
  const bar = li.querySelector('progress');
  bar.value = v.progress;
  bar.hidden = FINAL.has(v.status);
  const when = new Date(v.created_at * 1000).toLocaleTimeString();
  li.querySelector('.meta').textContent = `${v.size} · ${v.seconds} s · ${when}` +
    (v.prompt ? ` · “${v.prompt}”` : '') + (v.error ? ` · ${v.error.message}` : '') +
    (v.metadata && v.metadata.cache ? ` · ${v.metadata.cache}` : '');
  const actions = li.querySelector('.actions');
  actions.replaceChildren();
  if (!FINAL.has(v.status) && !cancelling) {
    actions.append(el('button', { class: 'danger', onclick: () => cancel(v.id) }, 'Cancel'));
  }
  if (v.status === 'completed') {
    loadMedia(v, li);
    const url = state.media.get(v.id);
    if (url) actions.append(el('a', { href: url, download: v.id + '.mp4', class: 'download' }, 'Download MP4'));
  }
  if (FINAL.has(v.status)) {
    actions.append(el('button', { class: 'secondary', onclick: () => remove(v.id) }, 'Delete'));
  }
}

async function loadMedia(v, li) {
  if (state.media.has(v.id)) return;
  state.media.set(v.id, null);
  try {
    const r = await api(`/v1/videos/${v.id}/content`);
    if (!r.ok) throw new Error(await body(r));
    const url = URL.createObjectURL(await r.blob());
    state.media.set(v.id, url);
    const video = el('video', { src: url, autoplay: '', muted: '', loop: '', playsinline: '', controls: '' });
    video.muted = true;
    video.addEventListener('error', () => gifFallback(v, video), { once: true });
    li.querySelector('.media').replaceChildren(video);
    render(state.jobs.get(v.id) || v);
  } catch (err) {
    state.media.delete(v.id);
  }
}

// gifFallback shows the GIF where the browser cannot play the MP4.
async function gifFallback(v, video) {
  const r = await api(`/v1/videos/${nativeID(v.id)}/content?format=gif`);
  if (!r.ok) return;
  const img = el('img', { class: 'result', alt: 'result', src: URL.createObjectURL(await r.blob()) });
  video.replaceWith(img);
}

async function cancel(id) {
  try {
    const v = await body(await api(`/v1/videos/${id}/cancel`, { method: 'POST' }));
    upsert(Object.assign(v, { cancelling: true }));
  } catch (err) { alert(err.message); }
}

async function remove(id) {
  try {
    await body(await api(`/v1/videos/${id}`, { method: 'DELETE' }));
    state.jobs.delete(id);
    const li = document.querySelector(`li[data-id="${id}"]`);
    if (li) li.remove();
    counts();
  } catch (err) { alert(err.message); }
}

// follow reads the job's native event stream (fetch, so that the token can be sent) and
// updates its progress on every event; at the end the video object is fetched again.
async function follow(id) {
  if (state.following.has(id)) return;
  state.following.add(id);
  try {
    const r = await api(`/v1/videos/${id}/events`);
    if (!r.ok || !r.body) return;
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const chunk = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = chunk.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data) onEvent(id, JSON.parse(data));
      }
    }
  } catch (err) {
    // The stream broke (server restart): the periodic refresh picks the job up again.
  } finally {
    state.following.delete(id);
  }
  try { upsert(await body(await api(`/v1/videos/${id}`))); } catch (err) { /* deleted */ }
}

function onEvent(id, st) {
  const v = state.jobs.get(id);
  if (!v) return;
  const status = { queued: 'queued', running: 'in_progress', succeeded: 'completed' }[st.state] || 'failed';
  const progress = status === 'completed' ? 100 : st.progress.steps ? Math.min(99, Math.floor(100 * st.progress.step / st.progress.steps)) : 0;
  if (status !== 'completed') upsert(Object.assign({}, v, { status, progress, cancelling: v.cancelling || !!st.cancel_requested }));
}

async function refresh() {
  try {
    const page = await body(await api('/v1/videos?limit=50'));
    $('conn').textContent = '';
    const seen = new Set();
    for (const v of page.data) {
      seen.add(v.id);
      const old = state.jobs.get(v.id);
      if (!old || old.status !== v.status || (!FINAL.has(v.status) && !state.following.has(v.id))) upsert(v);
      if (!FINAL.has(v.status)) follow(v.id);
    }
  } catch (err) {
    $('conn').textContent = 'server unreachable: ' + err.message;
  }
}

// groupBox is where the form shows a knob group's fields.
const groupBox = { basic: 'basic', long: 'long', cache: 'cache-box', advanced: 'advanced' };

// knobField builds the form field of one knob of the served model (vdpp_limits.knobs): a
// number, a choice, a checkbox or text, named by its OpenAI field, its default as the
// placeholder and its range as the browser's bounds; the server checks the same table.
function knobField(k) {
  const id = k.name.replace(/_/g, '-');
  const label = k.name.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());
  const def = k.default_text || (k.default === null || k.default === undefined ? '' : String(k.default));
  let input;
  if (k.choices && k.choices.length) {
    input = el('select', { id, name: k.openai || k.name }, el('option', { value: '' }, `default (${def || 'model'})`),
      ...k.choices.map((c) => el('option', { value: c }, c)));
  } else if (k.kind === 'bool') {
    input = el('input', { id, name: k.openai || k.name, type: 'checkbox' });
    input.style.width = 'auto';
  } else if (k.kind === 'int' || k.kind === 'float') {
    input = el('input', { id, name: k.openai || k.name, type: 'number', step: k.kind === 'int' ? '1' : 'any', placeholder: def });
    if (k.min || k.max) {
      input.min = String(k.min);
      if (k.max < 9e15) input.max = String(k.max);
    }
  } else {
    input = el('input', { id, name: k.openai || k.name, placeholder: def });
  }
  const lab = el('label', { title: k.help, 'data-knob': k.name }, label + ' ', input);
  lab.dataset.modes = (k.modes || []).join(' ');
  return lab;
}

// fitModel shows the fields the served model takes (its limits from GET /v1/models): the
// image for an image-to-video model, a required prompt and a negative prompt for a
// text-to-video one, both for a model that makes the video from an image and a prompt
// (Wan image-to-video), and one field per knob of its table, by group; the defaults as the
// placeholders. Size and Seconds are the OpenAI API's spellings of width x height and of
// the frames at the model's frame rate.
function fitModel(lim) {
  state.input = lim.input === 'text' ? 'text' : 'image';
  const text = state.input === 'text';
  // The inputs it takes (vdpp_limits.inputs: the knob table's, each with its need and its
  // OpenAI field, which this page posts).
  const input = name => (lim.inputs || []).find(i => i.name === name) || {};
  state.image = input('image').need || lim.image || (text ? 'none' : 'required');
  state.lastImage = input('last_image').need || lim.last_image || 'none';
  state.imageField = input('image').openai || 'input_reference';
  if (input('image').help) $('drop').title = input('image').help;
  const image = state.image !== 'none';
  $('drop').hidden = !image;
  $('image').disabled = !image;
  if (image && text) {
    $('drop-text').textContent = state.image === 'required'
      ? 'Drop the first frame\'s image here or click to pick one (PNG or JPEG): required'
      : 'Drop an image here or click to pick one (PNG or JPEG): optional, the first frame';
  }
  $('negative-row').hidden = !text;
  $('prompt').setAttribute('aria-required', String(text)); // the page's own message, not the browser's
  $('prompt-note').textContent = text ? '(required: the served model makes the video from it' + (image ? ' and the image)' : ')')
    : '(recorded; the served model is image-conditioned)';
  $('prompt').placeholder = text ? 'what the video shows' : 'a short description';
  const d = lim.defaults || {};
  if (d.width && d.height) $('size').placeholder = `${d.width}x${d.height} (default)`;
  else if (lim.native_width && lim.native_height) $('size').placeholder = `${lim.native_width}x${lim.native_height} (default)`;
  // Defaults fitted to this server (its memory, its time budget) say so.
  $('defaults-note').textContent = lim.defaults_why
    ? `Defaults fit this server: ${d.width}x${d.height}, ${d.num_frames} frames, ${d.steps} steps (${lim.defaults_why}).` : '';
  for (const k of lim.knobs || []) {
    if (k.name === 'width' || k.name === 'height') continue; // Size sets them
    if (k.name === 'scheduler' || k.name === 'flow_shift') continue; // the sampler box, from the model's list
    const box = $(groupBox[k.group] || 'advanced');
    (box.querySelector('.grid') || box).append(knobField(k));
    box.hidden = false;
  }
  if ($('num-frames') && (d.num_frames || lim.native_frames)) $('num-frames').placeholder = `${d.num_frames || lim.native_frames}` + (lim.max_frames ? `, max ${lim.max_frames}` : '');
  // The step cache: only the chosen mode's fields.
  const cache = $('cache');
  const showModes = () => {
    for (const lab of $('cache-box').querySelectorAll('label[data-knob]')) {
      if (lab.dataset.modes) lab.hidden = !lab.dataset.modes.split(' ').includes(cache.value);
    }
  };
  if (cache) {
    cache.addEventListener('change', showModes);
    showModes();
  }
  // The samplers the served model offers, and the flow shift of a flow model.
  const scheds = lim.schedulers || [];
  $('sampler-box').hidden = scheds.length === 0;
  for (const s of scheds) {
    const o = document.createElement('option');
    o.value = s;
    o.textContent = s;
    $('scheduler').append(o);
  }
  $('flow-shift-row').hidden = !lim.flow_shift;
  // The LoRAs of the server's folder a job may apply (name[:strength], comma-separated).
  const loras = lim.loras || [];
  $('lora-row').hidden = loras.length === 0;
  $('lora-note').hidden = loras.length === 0;
  $('lora-note').textContent = 'LoRAs on this server: ' + loras.join(', ');
  if (loras.length > 0) $('sampler-box').hidden = false;
  for (const n of loras) {
    const o = document.createElement('option');
    o.value = n;
    $('lora-names').append(o);
  }
  if (lim.flow_shift) $('flow-shift').placeholder = `${lim.flow_shift} (default)`;
}

async function init() {
  initForm();
  try {
    const m = await body(await api('/v1/models'));
    state.model = m.data[0].id;
    fitModel(m.data[0].vdpp_limits || {});
    $('model').textContent = state.model;
  } catch (err) { $('conn').textContent = err.message; }
  await refresh();
  setInterval(refresh, 3000);
}

init();
