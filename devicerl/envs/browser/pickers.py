"""Phone-style pickers for ``<select>`` elements, and date/time inputs that take typed text.

A desktop ``<select>`` opens a native pop-up that headless Chromium neither draws in screenshots
nor lets a click at a pixel reach, and a ``<select multiple>`` needs Ctrl/Shift-clicks to pick
several options: neither is reachable with the AitW action space (taps, swipes, typed text). A
phone browser shows a picker instead: a list of tappable options over the page. `PICKER_SCRIPT`
(installed in every document of a device's context, like `DOM_SCRIPT`) does the same:

- a tap on a ``<select>`` opens ``#__drl-picker`` over the screen area: a list of its options
  (``role="option"`` rows; for ``multiple``, a row per option with a checkbox, and a "Done"
  button), so options get boxes, texts and pixels like any element;
- tapping a row selects that option (``input`` and ``change`` events fire on the select, as
  when a user picks it) and closes the picker; for ``multiple`` each tap toggles one option and
  "Done" closes it; tapping outside the list closes it unchanged;
- a long list scrolls with a swipe (a drag moves the list like a finger on a phone) or the
  wheel; the picker closes when an episode starts (``window.__drlPickers.close()``).

Selects keep their keyboard behaviour (typing while one is focused picks by the typed prefix).

Date and time inputs (``type="date"``, ``type="time"``): Chromium edits them one segment at a
time, and which segment a tap focuses depends on the pixel (a tap at the centre of a MiniWoB
date input focuses none, so typing does nothing), and "9:37 PM" does not type into a time
input. A phone opens a picker that sets the whole value at once. Here the input takes the text
typed since it was last tapped or focused as a whole: a date as ``MM/DD/YYYY`` (``/``, ``.`` or
``-``) or ``YYYY-MM-DD``, a time as ``H:MM`` (24 h) or ``H:MM AM/PM``; once the text parses,
the value is set and ``input``/``change`` fire. Backspace deletes a typed character; other
keys are swallowed (digits-only forms such as ``05202010`` do not parse).
"""

from __future__ import annotations

PICKER_SCRIPT = r"""
(() => {
  if (window.__drlPickers) return;
  const add = EventTarget.prototype.addEventListener;
  let screen = null;  // [x, y, w, h] of the observed screen area in this document
  let picker = null;
  let drag = null;  // {y, top, moved} while a finger/mouse drags the list

  function selectOf(t) {
    return t && t.closest ? t.closest("select") : null;
  }
  function fire(sel) {
    sel.dispatchEvent(new Event("input", {bubbles: true}));
    sel.dispatchEvent(new Event("change", {bubbles: true}));
  }
  function close() {
    if (picker) { picker.remove(); picker = null; }
    drag = null;
    typed = new WeakMap();
  }
  function el(tag, css, attrs) {
    const e = document.createElement(tag);
    e.style.cssText = css;
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }
  function row(sel, opt, i) {
    const base = "display:flex;align-items:center;box-sizing:border-box;min-height:24px;" +
      "padding:2px 8px;border-bottom:1px solid #ddd;white-space:nowrap;overflow:hidden;" +
      "cursor:pointer;color:#000;";
    const text = opt.text.replace(/\s+/g, " ").trim();
    if (sel.multiple) {
      const r = el("label", base, {"class": "__drl-picker-row"});
      const box = el("input", "margin:0 6px 0 0;", {type: "checkbox"});
      box.checked = opt.selected;
      add.call(box, "change", () => { opt.selected = box.checked; fire(sel); });
      r.append(box, document.createTextNode(text));
      return r;
    }
    const r = el("div", base + (opt.selected ? "background:#cfe3ff;" : ""),
                 {role: "option", "class": "__drl-picker-row",
                  "aria-selected": String(opt.selected)});
    r.textContent = text;
    add.call(r, "click", () => {
      if (drag && drag.moved) return;
      sel.selectedIndex = i;
      fire(sel);
      close();
    });
    return r;
  }
  function open(sel) {
    close();
    const [x, y, w, h] = screen || [0, 0, window.innerWidth, window.innerHeight];
    picker = el("div", `position:fixed;left:${x}px;top:${y}px;width:${w}px;height:${h}px;` +
      "z-index:2147483647;background:rgba(0,0,0,0.4);display:flex;flex-direction:column;" +
      "justify-content:center;box-sizing:border-box;padding:6px;" +
      "font:13px/1.2 Arial,sans-serif;", {id: "__drl-picker", role: "dialog"});
    const list = el("div", "background:#fff;overflow-y:auto;min-height:0;flex:0 1 auto;" +
                    "border-radius:3px;", {role: "listbox"});
    Array.from(sel.options).forEach((opt, i) => {
      if (!opt.disabled) list.append(row(sel, opt, i));
    });
    picker.append(list);
    if (sel.multiple) {
      const done = el("button", "flex:none;margin-top:4px;font:inherit;", {type: "button"});
      done.textContent = "Done";
      add.call(done, "click", close);
      picker.append(done);
    }
    add.call(picker, "click", (e) => { if (e.target === picker) close(); });
    add.call(list, "mousedown", (e) => {
      drag = {y: e.clientY, top: list.scrollTop, moved: false};
    });
    add.call(list, "mousemove", (e) => {
      if (!drag || !(e.buttons & 1)) return;
      if (Math.abs(e.clientY - drag.y) > 4) drag.moved = true;
      list.scrollTop = drag.top - (e.clientY - drag.y);
    });
    add.call(list, "click", (e) => {
      if (drag && drag.moved) { e.stopPropagation(); e.preventDefault(); }
      drag = null;
    }, true);
    document.body.append(picker);
    const chosen = list.querySelector('[aria-selected="true"]');
    if (chosen) chosen.scrollIntoView({block: "nearest"});
  }
  // Date and time inputs take typed text as a whole (see the module doc).
  const TEMPORAL = new Set(["date", "time"]);
  let typed = new WeakMap();  // input -> the text typed since it was last tapped or focused
  const pad = (n) => String(n).padStart(2, "0");
  function parseTemporal(type, s) {
    s = s.trim();
    let m;
    if (type === "date") {
      let y, mo, d;
      if ((m = /^(\d{1,2})[\/.-](\d{1,2})[\/.-](\d{4})$/.exec(s))) [mo, d, y] = [m[1], m[2], m[3]];
      else if ((m = /^(\d{4})-(\d{1,2})-(\d{1,2})$/.exec(s))) [y, mo, d] = [m[1], m[2], m[3]];
      else return null;
      const date = new Date(Date.UTC(+y, +mo - 1, +d));
      if (date.getUTCMonth() !== +mo - 1 || date.getUTCDate() !== +d) return null;
      return `${y}-${pad(mo)}-${pad(d)}`;
    }
    m = /^(\d{1,2}):(\d{2})(?::\d{2})?\s*(?:([AaPp])\.?\s*(?:[Mm]\.?)?)?$/.exec(s);
    if (!m) return null;
    let h = +m[1];
    const min = +m[2];
    if (m[3]) {
      if (h < 1 || h > 12) return null;
      h = (h % 12) + (m[3].toLowerCase() === "p" ? 12 : 0);
    }
    return h < 24 && min < 60 ? `${pad(h)}:${pad(min)}` : null;
  }
  function temporal(t) {
    return t instanceof HTMLInputElement && TEMPORAL.has(t.type) ? t : null;
  }
  for (const type of ["focusin", "mousedown"]) {
    add.call(window, type, (e) => { if (temporal(e.target)) typed.set(e.target, ""); }, true);
  }
  add.call(window, "keydown", (e) => {
    const t = temporal(e.target);
    if (!t || e.key === "Tab" || e.key === "Enter" || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    let buf = typed.get(t) || "";
    if (e.key === "Backspace") buf = buf.slice(0, -1);
    else if (e.key.length === 1) buf += e.key;
    typed.set(t, buf);
    const v = parseTemporal(t.type, buf);
    if (v !== null && v !== t.value) { t.value = v; fire(t); }
  }, true);
  // Capture phase on the window: before the page's own handlers see the event.
  add.call(window, "mousedown", (e) => {
    const sel = selectOf(e.target);
    if (sel && !sel.disabled) e.preventDefault();  // no native pop-up / listbox selection
  }, true);
  add.call(window, "click", (e) => {
    const sel = selectOf(e.target);
    if (!sel || sel.disabled) return;
    e.preventDefault();
    sel.focus();
    open(sel);
  }, true);
  Object.defineProperty(window, "__drlPickers", {enumerable: false, value: {
    close,
    setScreen(s) { screen = s; },
    isOpen() { return picker !== null; },
  }});
})();
"""


#: Closes an open picker and tells the picker script where the screen area is (run at reset).
def picker_reset_js(screen: tuple[float, float, float, float]) -> str:
    x, y, w, h = screen
    return (
        f"if (window.__drlPickers) {{ window.__drlPickers.close(); "
        f"window.__drlPickers.setScreen([{x}, {y}, {w}, {h}]); }}"
    )
