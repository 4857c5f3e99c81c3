// vmkit's web console. Served by virt-api at
//   {root}/apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/console/web/
// and run with the user's own credentials: every request goes to the origin
// the page came from (kubectl proxy, vmctl console --web), which adds them.
// `_` as the name lists the namespace only; #console and #vnc open a VMI's
// serial or graphical console.

const SUB = '/apis/subresources.kubevirt.io/v1';
const PROTOCOL = 'plain.kubevirt.io'; // virt-api's stream subprotocol
const TIMELINE = 'vmkit.io/start-timeline';

const where = location.pathname.match(/^(.*)\/apis\/subresources\.kubevirt\.io\/v1\/namespaces\/([^/]+)\/virtualmachineinstances\/([^/]+)\/console\/web\//);
const root = where ? where[1] : '';
const ns = where ? decodeURIComponent(where[2]) : 'default';
const nsPath = `/namespaces/${encodeURIComponent(ns)}`;

const $ = (id) => document.getElementById(id);
const enc = new TextEncoder();

let current = where && where[3] !== '_' ? decodeURIComponent(where[3]) : null;
let view = location.hash === '#vnc' ? 'vnc' : 'console';
let term, fit, ws, rfb, reconnectTimer, attempts = 0, guestClipboard = '';
let vmis = new Map();

// --- the API, with the user's credentials through the page's origin ---------

async function api(method, path, body) {
  const r = await fetch(root + path, {
    method, credentials: 'same-origin',
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let obj = null;
  try { obj = JSON.parse(text); } catch { /* not JSON */ }
  if (!r.ok) throw new Error((obj && obj.message) || `${r.status} ${r.statusText}: ${text.slice(0, 200)}`);
  return obj;
}

// notice says msg in the header; errors stand out.
function notice(msg, error = false) {
  $('notice').textContent = msg || '';
  $('notice').classList.toggle('error', error);
}

// --- the list of VMs ---------------------------------------------------------

function condition(obj, type) {
  return ((obj && obj.status && obj.status.conditions) || []).find((c) => c.type === type);
}

function rowsOf(vmList, vmiList) {
  const rows = new Map();
  for (const vm of vmList.items || []) rows.set(vm.metadata.name, { name: vm.metadata.name, vm });
  for (const vmi of vmiList.items || []) {
    const row = rows.get(vmi.metadata.name) || { name: vmi.metadata.name };
    row.vmi = vmi;
    rows.set(vmi.metadata.name, row);
  }
  return [...rows.values()].sort((a, b) => a.name.localeCompare(b.name));
}

function statusOf(row) {
  if (row.vm && row.vm.status && row.vm.status.printableStatus) return row.vm.status.printableStatus;
  if (row.vmi) return (condition(row.vmi, 'Paused') || {}).status === 'True' ? 'Paused' : row.vmi.status.phase || 'Pending';
  return 'Stopped';
}

function actionsOf(row) {
  const running = !!row.vmi && row.vmi.status && row.vmi.status.phase === 'Running';
  const paused = row.vmi && (condition(row.vmi, 'Paused') || {}).status === 'True';
  const a = [];
  if (row.vm) {
    if (!row.vmi) a.push(['start', 'virtualmachines']);
    else a.push(['stop', 'virtualmachines'], ['restart', 'virtualmachines']);
  }
  if (running && !paused) a.push(['pause', 'virtualmachineinstances']);
  if (paused) a.push(['unpause', 'virtualmachineinstances']);
  return a;
}

function button(label, onclick, name) {
  const b = document.createElement('button');
  b.textContent = label;
  if (name) b.dataset.action = name;
  b.addEventListener('click', onclick);
  return b;
}

function cell(tr, content) {
  const td = tr.insertCell();
  if (typeof content === 'string') td.textContent = content;
  else for (const c of content) td.append(c);
}

async function refresh() {
  try {
    const [vmList, vmiList] = await Promise.all([
      api('GET', `/apis/kubevirt.io/v1${nsPath}/virtualmachines`),
      api('GET', `/apis/kubevirt.io/v1${nsPath}/virtualmachineinstances`),
    ]);
    vmis = new Map((vmiList.items || []).map((v) => [v.metadata.name, v]));
    const body = $('vms');
    body.replaceChildren();
    const rows = rowsOf(vmList, vmiList);
    for (const row of rows) {
      const tr = body.insertRow();
      tr.dataset.name = row.name;
      tr.classList.toggle('selected', row.name === current);
      cell(tr, row.name);
      cell(tr, statusOf(row));
      cell(tr, (row.vmi && row.vmi.status.nodeName) || '');
      cell(tr, (row.vmi && ((row.vmi.status.interfaces || [])[0] || {}).ipAddress) || '');
      cell(tr, [
        ...actionsOf(row).map(([op, kind]) => button(op[0].toUpperCase() + op.slice(1), () => act(kind, row.name, op), op)),
        button('Console', () => open(row.name, 'console'), 'console'),
        button('VNC', () => open(row.name, 'vnc'), 'vnc'),
      ]);
    }
    if (rows.length === 0) body.insertRow().insertCell().textContent = `No virtual machines in ${ns}.`;
    if (current) showTimeline(vmis.get(current));
  } catch (e) {
    notice(`Listing the VMs of ${ns}: ${e.message}`, true);
  }
}

async function act(kind, name, op) {
  notice('');
  try {
    await api('PUT', `${SUB}${nsPath}/${kind}/${encodeURIComponent(name)}/${op}`, {});
    notice(`${op} ${name}: accepted`);
  } catch (e) {
    notice(`${op} ${name}: ${e.message}`, true);
  }
  refresh();
}

// --- the consoles --------------------------------------------------------------

function status(s) { $('status').textContent = s; }

function streamURL(kind) {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${root}${SUB}${nsPath}/virtualmachineinstances/${encodeURIComponent(current)}/${kind}`;
}

function disconnect() {
  clearTimeout(reconnectTimer);
  if (ws) { const w = ws; ws = null; w.close(); }
  if (rfb) { const r = rfb; rfb = null; r.disconnect(); }
}

// reconnect tries again with a growing pause (1 s to 10 s): the VMI may not
// run yet, may be restarting, or its node agent may be moving it.
function reconnect(why) {
  clearTimeout(reconnectTimer);
  const wait = Math.min(10, 2 ** Math.min(attempts, 4)) * 1000;
  attempts++;
  status(`${view}: ${why}; trying again in ${wait / 1000} s`);
  reconnectTimer = setTimeout(connect, wait);
}

async function connect() {
  disconnect();
  if (!current) return;
  try {
    if (view === 'console') await connectSerial();
    else await connectVNC();
  } catch (e) {
    status(`${view}: ${e.message}`);
  }
}

async function connectSerial() {
  if (!term) {
    const [{ Terminal }, { FitAddon }] = await Promise.all([import('./lib/xterm/xterm.mjs'), import('./lib/xterm/addon-fit.mjs')]);
    term = new Terminal({ convertEol: false, scrollback: 5000, fontFamily: 'monospace' });
    fit = new FitAddon();
    term.loadAddon(fit);
    term.open($('console'));
    term.onData((d) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d)); });
  }
  fit.fit();
  term.reset();
  status('console: connecting');
  // history=true replays what the guest printed since it started.
  const w = new WebSocket(streamURL('console') + '?history=true', [PROTOCOL]);
  ws = w;
  w.binaryType = 'arraybuffer';
  w.onopen = () => { attempts = 0; status('console: connected'); term.focus(); };
  w.onmessage = (e) => term.write(typeof e.data === 'string' ? e.data : new Uint8Array(e.data));
  w.onclose = () => { if (ws === w) { ws = null; reconnect('disconnected'); } };
}

async function connectVNC() {
  const { default: RFB } = await import('./lib/novnc/core/rfb.js');
  status('vnc: connecting');
  const r = new RFB($('vnc'), streamURL('vnc'), { wsProtocols: [PROTOCOL] });
  rfb = r;
  r.scaleViewport = true;
  r.addEventListener('connect', () => { attempts = 0; status('vnc: connected'); r.focus(); });
  r.addEventListener('disconnect', () => { if (rfb === r) { rfb = null; reconnect('disconnected'); } });
  r.addEventListener('clipboard', (e) => { guestClipboard = e.detail.text; status('vnc: connected, the guest copied text'); });
}

function open(name, v) {
  current = name;
  view = v;
  attempts = 0;
  // The page's address names the VMI, so it can be bookmarked and reloaded.
  const path = location.pathname.replace(/\/virtualmachineinstances\/[^/]+\/console\/web\/.*$/,
    `/virtualmachineinstances/${encodeURIComponent(name)}/console/web/`);
  history.replaceState(null, '', `${path}#${v}`);
  $('viewer').hidden = false;
  $('vm-name').textContent = name;
  $('console').hidden = v !== 'console';
  $('vnc').hidden = v !== 'vnc';
  $('tab-console').classList.toggle('active', v === 'console');
  $('tab-vnc').classList.toggle('active', v === 'vnc');
  for (const tr of $('vms').rows) tr.classList.toggle('selected', tr.dataset.name === name);
  showTimeline(vmis.get(name));
  connect();
}

// typeKeys types text into the graphical console key by key: a guest
// without a clipboard agent still gets it.
function typeKeys(text) {
  for (const ch of text) {
    const code = ch.codePointAt(0);
    const keysym = ch === '\n' ? 0xff0d : code < 0x100 ? code : 0x01000000 | code;
    rfb.sendKey(keysym, null, true);
    rfb.sendKey(keysym, null, false);
  }
}

async function paste() {
  let text;
  try { text = await navigator.clipboard.readText(); } catch (e) { notice(`Reading the clipboard: ${e.message}`, true); return; }
  if (view === 'console' && term) term.paste(text);
  else if (rfb) { rfb.clipboardPasteFrom(text); typeKeys(text); }
}

async function copy() {
  const text = view === 'console' ? (term ? term.getSelection() : '') : guestClipboard;
  try { await navigator.clipboard.writeText(text); notice(text ? 'Copied.' : 'Nothing to copy.'); } catch (e) { notice(`Copying: ${e.message}`, true); }
}

// --- the start timeline (vmkit.io/start-timeline) -----------------------------

function showTimeline(vmi) {
  const table = $('timeline');
  table.replaceChildren();
  let phases = [];
  try { phases = JSON.parse((vmi && vmi.metadata.annotations && vmi.metadata.annotations[TIMELINE]) || '[]'); } catch { /* none */ }
  $('timeline-box').hidden = phases.length === 0;
  let first, prev;
  for (const p of phases) {
    const t = Date.parse(p.time);
    first ??= t;
    const tr = table.insertRow();
    cell(tr, p.phase);
    cell(tr, prev === undefined ? '' : `+${((t - prev) / 1000).toFixed(3)} s`);
    cell(tr, `${((t - first) / 1000).toFixed(3)} s`);
    prev = t;
  }
}

// --- wiring ----------------------------------------------------------------------

$('namespace').textContent = `namespace ${ns}`;
$('tab-console').addEventListener('click', () => open(current, 'console'));
$('tab-vnc').addEventListener('click', () => open(current, 'vnc'));
$('reconnect').addEventListener('click', () => { attempts = 0; connect(); });
$('close').addEventListener('click', () => {
  disconnect();
  current = null;
  $('viewer').hidden = true;
  history.replaceState(null, '', location.pathname.replace(/\/virtualmachineinstances\/[^/]+\/console\/web\/.*$/, '/virtualmachineinstances/_/console/web/'));
});
$('copy').addEventListener('click', copy);
$('paste').addEventListener('click', paste);
$('cad').addEventListener('click', () => { if (rfb) rfb.sendCtrlAltDel(); });
window.addEventListener('resize', () => { if (fit && view === 'console') fit.fit(); });

// For scripts and tests: the serial console's whole text and the status line.
window.webconsole = {
  serialText() {
    if (!term) return '';
    const b = term.buffer.active;
    const lines = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
    return lines.join('\n');
  },
  status: () => $('status').textContent,
};

if (!where) notice('This page is served by virt-api under …/namespaces/{namespace}/virtualmachineinstances/{name}/console/web/.', true);
refresh();
setInterval(refresh, 3000);
if (current) open(current, view);
