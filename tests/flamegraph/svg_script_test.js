// SPDX-License-Identifier: MIT OR Apache-2.0
// Runs the script of a flame graph SVG against a minimal DOM built from the
// file itself and checks what a user does with it: hover shows the frame's
// name, value and share; clicking a frame zooms it to the full width with
// its descendants scaled, its ancestors dimmed and everything else hidden;
// the reset control and Esc restore the original layout; the labels the
// script draws match the ones in the file. Names are only ever read from
// the DOM, so hostile names in the file cannot change what runs.
//
//   node svg_script_test.js FILE.svg      (exit 0 = pass)
'use strict';
const fs = require('fs');

function fail(msg) {
  console.error('svg_script_test: ' + msg);
  process.exit(1);
}

function decode(s) {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g, (m, e) => {
    if (e[0] === '#')
      return String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
    return { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }[e];
  });
}

class Text {
  constructor(text, parent) { this.text = text; this.parentNode = parent; }
}

class Element {
  constructor(tag, attrs, parent) {
    this.tagName = tag;
    this.attrs = attrs;
    this.parentNode = parent;
    this.children = [];
    this.listeners = {};
  }
  getAttribute(n) { return this.attrs.has(n) ? this.attrs.get(n) : null; }
  setAttribute(n, v) { this.attrs.set(n, String(v)); }
  removeAttribute(n) { this.attrs.delete(n); }
  getElementsByTagName(t) {
    const out = [];
    const walk = (e) => e.children.forEach((c) => {
      if (c instanceof Element) { if (c.tagName === t) out.push(c); walk(c); }
    });
    walk(this);
    return out;
  }
  get textContent() {
    return this.children.map((c) => (c instanceof Text ? c.text : c.textContent)).join('');
  }
  set textContent(v) { this.children = [new Text(String(v), this)]; }
  addEventListener(type, fn) { (this.listeners[type] = this.listeners[type] || []).push(fn); }
}

// A small XML reader for the documents culpert writes (svgcheck and xmllint
// check well-formedness separately).
function parse(xml) {
  const document = { listeners: {}, addEventListener: Element.prototype.addEventListener };
  let cur = null;
  const re = /<!--[\s\S]*?-->|<!\[CDATA\[([\s\S]*?)\]\]>|<\?[\s\S]*?\?>|<\/([\w:.-]+)\s*>|<([\w:.-]+)((?:\s+[\w:.-]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>|([^<]+)/g;
  let m;
  while ((m = re.exec(xml))) {
    if (m[1] !== undefined) {
      cur.children.push(new Text(m[1], cur));
    } else if (m[2]) {
      cur = cur.parentNode === document ? cur : cur.parentNode;
    } else if (m[3]) {
      const attrs = new Map();
      const are = /([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;
      let a;
      while ((a = are.exec(m[4]))) attrs.set(a[1], decode(a[2] !== undefined ? a[2] : a[3]));
      const el = new Element(m[3], attrs, cur || document);
      if (cur) cur.children.push(el); else document.documentElement = el;
      if (!m[5]) cur = el;
    } else if (m[6] !== undefined && cur) {
      cur.children.push(new Text(decode(m[6]), cur));
    }
  }
  document.getElementsByTagName = (t) =>
    (document.documentElement.tagName === t ? [document.documentElement] : [])
      .concat(document.documentElement.getElementsByTagName(t));
  document.getElementById = (id) => [document.documentElement]
    .concat(allElements(document.documentElement))
    .find((e) => e.getAttribute('id') === id) || null;
  return document;
}

function allElements(root) {
  const out = [];
  const walk = (e) => e.children.forEach((c) => { if (c instanceof Element) { out.push(c); walk(c); } });
  walk(root);
  return out;
}

function fire(document, type, target, extra) {
  const ev = Object.assign({ type, target }, extra || {});
  const on = type === 'keydown' ? document.listeners : document.documentElement.listeners;
  (on[type] || []).forEach((fn) => fn(ev));
}

const file = process.argv[2];
const document = parse(fs.readFileSync(file, 'utf8'));
const svg = document.documentElement;
const scripts = svg.getElementsByTagName('script');
if (scripts.length !== 1) fail('expected one <script>, found ' + scripts.length);

const frames = svg.getElementsByTagName('g')
  .filter((g) => /(^| )f( |$)/.test(g.getAttribute('class') || ''))
  .map((g) => {
    const r = g.getElementsByTagName('rect')[0];
    return {
      g, r, t: g.getElementsByTagName('text')[0], name: g.getAttribute('data-n'),
      x: +r.getAttribute('x'), w: +r.getAttribute('width'), y: +r.getAttribute('y'),
      label: g.getElementsByTagName('text')[0].textContent,
      tip: g.getElementsByTagName('title')[0].textContent,
    };
  });
if (frames.length < 2) fail('fewer than two frames in ' + file);
const root = frames[0];
if (root.name !== 'all' || Math.abs(root.w - 1180) > 0.01) fail('first frame is not the full-width "all"');

let prompts = 0;
const window = { prompt: () => { prompts++; return null; } };
new Function('document', 'window', scripts[0].textContent)(document, window);

const shown = (f) => f.g.getAttribute('display') !== 'none';
const px = (f) => [+f.r.getAttribute('x'), +f.r.getAttribute('width')];
const near = (a, b) => Math.abs(a - b) < 0.02;
const details = document.getElementById('details');
const reset = document.getElementById('reset');

// Hover: name, value and share, as in the <title>.
frames.forEach((f) => {
  fire(document, 'mouseover', f.r);
  // A differential graph's tooltip has a third line, after a middle dot.
  const want = f.tip.replace('\n', ' \u2014 ').replace(/\n/g, ' \u00b7 ');
  if (details.textContent !== want) fail(`hover on "${f.name}" shows "${details.textContent}", want "${want}"`);
  if (!/^.* \u2014 .+ \(\d+\.\d\d%\)( \u00b7 [^\n]+)?$/.test(details.textContent)) fail('hover text lacks value and share: ' + details.textContent);
});

function checkOriginal(when) {
  frames.forEach((f) => {
    const [x, w] = px(f);
    if (!shown(f) || !near(x, f.x) || !near(w, f.w)) fail(`${when}: "${f.name}" not back at ${f.x}/${f.w}`);
    if (/\bdim\b/.test(f.g.getAttribute('class'))) fail(`${when}: "${f.name}" still dimmed`);
    if (f.t.textContent !== f.label) fail(`${when}: label "${f.t.textContent}" differs from the file's "${f.label}"`);
  });
  if (reset.getAttribute('display') !== 'none') fail(`${when}: reset control still shown`);
}

// Clicking "all" re-lays out the original graph: the script's labels must
// match the ones written into the file.
fire(document, 'click', root.r);
checkOriginal('after clicking all');

// Zoom into every frame that has a descendant, in turn.
// Coordinates are written with two decimals: allow for their rounding.
const EPS = 0.05;
const isDesc = (d, a) => d.y < a.y && d.x >= a.x - EPS && d.x + d.w <= a.x + a.w + EPS;
let zooms = 0;
frames.slice(1).forEach((z) => {
  const kids = frames.filter((d) => isDesc(d, z));
  if (!kids.length) return;
  zooms++;
  fire(document, 'click', z.t);
  const scale = 1180 / z.w;
  frames.forEach((f) => {
    const [x, w] = px(f);
    if (f === z || isDesc(f, z)) {
      if (!shown(f) || !near(x, 10 + (f.x - z.x) * scale) || !near(w, f.w * scale))
        fail(`zoom on "${z.name}": "${f.name}" at ${x}/${w}, want ${10 + (f.x - z.x) * scale}/${f.w * scale}`);
      // The label uses the new width: the whole name when it fits (7.2px a
      // character, 6px of margin), else as much as fits and an ellipsis.
      const cols = Math.floor((w - 6) / 7.2 + 1e-6);
      const chars = Array.from(f.name);
      const want = cols < 3 ? '' : chars.length <= cols ? f.name : chars.slice(0, cols - 1).join('') + '\u2026';
      if (f.t.textContent !== want) fail(`zoom on "${z.name}": label "${f.t.textContent}" in a ${w}px frame, want "${want}"`);
    } else if (f.y > z.y && f.x <= z.x + EPS && f.x + f.w >= z.x + z.w - EPS) {
      if (!shown(f) || !near(x, 10) || !near(w, 1180) || !/\bdim\b/.test(f.g.getAttribute('class')))
        fail(`zoom on "${z.name}": ancestor "${f.name}" not full width and dimmed`);
    } else if (shown(f)) {
      fail(`zoom on "${z.name}": unrelated "${f.name}" still shown`);
    }
  });
  if (reset.getAttribute('display') === 'none') fail('no reset control while zoomed');
  if (zooms % 2) fire(document, 'click', reset); else fire(document, 'keydown', svg, { key: 'Escape' });
  checkOriginal(`after resetting the zoom on "${z.name}"`);
});
if (zooms === 0) fail('no frame with descendants to zoom into');
if (prompts !== 0) fail('clicking frames opened a prompt');

// Search: the name of the last frame, as a literal; every frame with that
// name (and only those) turns magenta, the share of the graph they cover is
// shown, and a second click on the control clears it.
const search = document.getElementById('search');
const matched = document.getElementById('matched');
const target = frames[frames.length - 1].name;
const literal = target.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
window.prompt = () => { prompts++; return literal; };
fire(document, 'click', search);
if (prompts !== 1) fail('the search control did not ask for a pattern');
let width = 0;
frames.slice(1).forEach((f) => {
  const hit = f.name.includes(target);
  if (/(^| )m( |$)/.test(f.g.getAttribute('class')) !== hit)
    fail(`search for "${target}": "${f.name}" ${hit ? 'not ' : ''}highlighted`);
});
// Frames with the same name never nest in these fixtures, so their widths add.
frames.slice(1).filter((f) => f.name.includes(target)).forEach((f) => { width += f.w; });
const share = (100 * width / 1180).toFixed(2);
if (matched.textContent !== 'Matched: ' + share + '%')
  fail(`search for "${target}" shows "${matched.textContent}", want "Matched: ${share}%"`);
fire(document, 'click', search);
if (frames.some((f) => /(^| )m( |$)/.test(f.g.getAttribute('class'))) || matched.textContent !== '')
  fail('a second click on the search control did not clear the search');
console.log(`svg_script_test: ${file}: ${frames.length} frames, ${zooms} zooms checked`);
