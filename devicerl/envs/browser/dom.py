"""DOM -> `UIElement`s in one JavaScript call.

`DOM_SCRIPT` is installed in every document of a device's browser context (Playwright init
script, so it runs before the page's own scripts). It defines ``window.__drl`` with:

- ``observe(opts, status)``: walks the visible DOM (same-origin iframes and open shadow roots
  included) and returns compact element records plus the task's ``status`` value, so a step
  needs one evaluation for status and elements together;
- ``resetIds()``: element ids are ``e0, e1, ...`` in document order of first sight, stable
  for the element's life within an episode and reset at each episode start (so equal seeds
  give equal ids);
- ``editableFocused()``: whether the focused element (inside iframes and shadow roots too)
  takes typed text;
- ``settle(capMs, gapMs)``: resolves once no animation runs (finite CSS animations and
  transitions, Web Animations, jQuery's animation timers), polling every ``gapMs``, or after
  ``capMs``; true when the page settled;
- ``answer``: the episode's last answer (an ANSWER action's text; null before one), which the
  device sets and a task's status script may read.

It also notes which elements get click-like listeners (``addEventListener`` is wrapped), so
``clickable`` covers elements made clickable by script, not only buttons and links.

An element is reported when it is visible inside the screen area (clipped by scrolling
ancestors) and is interactive, has its own text, or is a painted leaf (image, shape, coloured
box). ``text`` is the element's visible text (``innerText``) for interactive and leaf elements
and its own text nodes for containers, so a container does not repeat its children's text.
"""

from __future__ import annotations

from typing import Any

from devicerl.records import UIElement

DOM_SCRIPT = r"""
(() => {
  if (window.__drl) return;
  const CLICK_EVENTS = new Set(["click", "dblclick", "mousedown", "mouseup", "pointerdown",
                                "pointerup", "touchstart", "touchend"]);
  const listened = new WeakSet();
  const addListener = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = function (type, listener, options) {
    if (CLICK_EVENTS.has(type) && this instanceof Element) listened.add(this);
    return addListener.call(this, type, listener, options);
  };
  let ids = new WeakMap();
  let nextId = 0;
  const SKIP_TAGS = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "META", "LINK",
                             "TITLE", "BR", "WBR"]);
  const INTERACTIVE_TAGS = new Set(["A", "BUTTON", "INPUT", "SELECT", "TEXTAREA", "OPTION",
                                    "LABEL", "SUMMARY"]);
  const INTERACTIVE_ROLES = new Set(["button", "link", "tab", "checkbox", "radio", "menuitem",
    "menuitemcheckbox", "menuitemradio", "option", "switch", "treeitem", "combobox", "textbox",
    "searchbox", "slider", "spinbutton", "listbox"]);
  const MEDIA_TAGS = new Set(["IMG", "SVG", "svg", "CANVAS", "VIDEO", "IFRAME", "circle", "rect",
    "ellipse", "polygon", "path", "line", "polyline", "text", "image"]);
  const NON_TEXT_INPUTS = new Set(["checkbox", "radio", "button", "submit", "reset", "image",
                                   "range", "color", "file", "hidden"]);
  const IMPLICIT_ROLE = {BUTTON: "button", SELECT: "combobox", TEXTAREA: "textbox",
    OPTION: "option", IMG: "img", LI: "listitem", UL: "list", OL: "list", H1: "heading",
    H2: "heading", H3: "heading", H4: "heading", H5: "heading", H6: "heading", LABEL: "label",
    TABLE: "table", TR: "row", TD: "cell", TH: "columnheader", P: "paragraph", FORM: "form",
    NAV: "navigation", SPAN: "text", DIV: "group", SVG: "img", svg: "img", CANVAS: "img"};

  function roleOf(el, tag) {
    const explicit = el.getAttribute("role");
    if (explicit) return explicit.split(" ")[0];
    if (tag === "INPUT") {
      const t = el.type;
      if (t === "checkbox" || t === "radio") return t;
      if (t === "button" || t === "submit" || t === "reset" || t === "image") return "button";
      if (t === "range") return "slider";
      if (t === "number") return "spinbutton";
      return "textbox";
    }
    if (tag === "A") return el.hasAttribute("href") ? "link" : "text";
    return IMPLICIT_ROLE[tag] || tag.toLowerCase();
  }
  function squash(s, n) {
    s = (s || "").replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n) : s;
  }
  function ownText(el, n) {
    let s = "";
    for (const c of el.childNodes) if (c.nodeType === 3) s += " " + c.data;
    return squash(s, n);
  }
  function valueOf(el, tag) {
    if (tag === "INPUT") {
      if (el.type === "checkbox" || el.type === "radio") return el.checked ? "true" : "false";
      return el.value;
    }
    if (tag === "TEXTAREA") return el.value;
    if (tag === "SELECT") {
      const o = el.options[el.selectedIndex];
      return o ? squash(o.text, 200) : "";
    }
    return "";
  }
  function isEditable(el, tag) {
    return el.isContentEditable || tag === "TEXTAREA" ||
      (tag === "INPUT" && !NON_TEXT_INPUTS.has(el.type));
  }
  function editableFocused() {
    const a = deepActive(document);
    return !!a && isEditable(a, a.tagName);
  }
  function deepActive(doc) {
    let a = doc.activeElement;
    for (;;) {
      if (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
      else if (a && a.tagName === "IFRAME") {
        let inner = null;
        try { inner = a.contentDocument; } catch (e) { inner = null; }
        if (!inner || !inner.activeElement || inner.activeElement === inner.body) return a;
        a = inner.activeElement;
      } else return a;
    }
  }
  function attrsOf(el, tag, st) {
    const a = {tag: tag.toLowerCase()};
    if (el.id) a.id = el.id;
    const cls = el.getAttribute("class");
    if (cls) a["class"] = cls;
    for (const k of ["type", "name", "placeholder", "href", "title", "alt", "aria-label"]) {
      const v = el.getAttribute(k);
      if (v) a[k] = v.length > 200 ? v.slice(0, 200) : v;
    }
    if (tag === "INPUT" && (el.type === "checkbox" || el.type === "radio")) a.checked = el.checked;
    if (el.disabled) a.disabled = true;
    if (tag === "OPTION" && el.selected) a.selected = true;
    if (st.backgroundColor && st.backgroundColor !== "rgba(0, 0, 0, 0)") a.bg = st.backgroundColor;
    if (el instanceof SVGElement && st.fill && st.fill !== "none") a.fill = st.fill;
    return a;
  }

  function observe(opts, status) {
    const out = [];
    const skip = new Set(opts.skip || []);
    const maxN = opts.max || 300;
    const maxText = opts.maxText || 200;
    const [cx, cy, cw, ch] = opts.clip;
    const active = deepActive(document);

    function visit(el, dx, dy, clip, win) {
      if (out.length >= maxN) return;
      const tag = el.tagName;
      if (SKIP_TAGS.has(tag) || (el.id && skip.has(el.id))) return;
      const st = win.getComputedStyle(el);
      if (st.display === "none") return;
      const r = el.getBoundingClientRect();
      const l = r.left + dx, t = r.top + dy, rr = r.right + dx, b = r.bottom + dy;
      const L = Math.max(l, clip[0]), T = Math.max(t, clip[1]);
      const R = Math.min(rr, clip[2]), B = Math.min(b, clip[3]);
      const shown = R > L && B > T && st.visibility !== "hidden" && st.opacity !== "0" &&
        tag !== "BODY" && tag !== "HTML";
      if (shown) {
        const role = roleOf(el, tag);
        const editable = isEditable(el, tag);
        const clickable = INTERACTIVE_TAGS.has(tag) || INTERACTIVE_ROLES.has(role) ||
          listened.has(el) || el.onclick != null || st.cursor === "pointer";
        const leaf = el.childElementCount === 0;
        const own = ownText(el, maxText);
        const painted = MEDIA_TAGS.has(tag) || st.backgroundImage !== "none" ||
          st.backgroundColor !== "rgba(0, 0, 0, 0)" || st.borderTopStyle !== "none";
        if (clickable || editable || own || (leaf && painted)) {
          let id = ids.get(el);
          if (id === undefined) { id = "e" + nextId++; ids.set(el, id); }
          const text = (clickable || leaf)
            ? squash(el.innerText !== undefined ? el.innerText : el.textContent, maxText) : own;
          const flags = (clickable ? 1 : 0) | (el === active ? 2 : 0) | (editable ? 4 : 0);
          out.push([id, role, text, valueOf(el, tag), L - cx, T - cy, R - cx, B - cy, flags,
                    attrsOf(el, tag, st)]);
        }
      }
      let inner = clip;
      if (st.overflowX !== "visible" || st.overflowY !== "visible") {
        inner = [Math.max(l, clip[0]), Math.max(t, clip[1]),
                 Math.min(rr, clip[2]), Math.min(b, clip[3])];
        if (inner[2] <= inner[0] || inner[3] <= inner[1]) return;
      }
      if (tag === "IFRAME") {
        let doc = null;
        try { doc = el.contentDocument; } catch (e) { doc = null; }
        if (doc && doc.body) {
          visit(doc.body, l + el.clientLeft, t + el.clientTop,
                [L, T, R, B], doc.defaultView);
        }
        return;
      }
      if (el.shadowRoot) for (const c of el.shadowRoot.children) visit(c, dx, dy, inner, win);
      for (const c of el.children) visit(c, dx, dy, inner, win);
    }
    if (document.body) visit(document.body, 0, 0, [cx, cy, cx + cw, cy + ch], window);
    return {els: out, status: status, url: location.href, ready: document.readyState};
  }

  function resetIds() { ids = new WeakMap(); nextId = 0; }

  function animating() {
    const finite = a => a.playState === "running" &&
      Number.isFinite(a.effect ? a.effect.getComputedTiming().endTime : Infinity);
    const jq = window.jQuery;
    return document.getAnimations().some(finite) || !!(jq && jq.timers && jq.timers.length);
  }

  async function settle(capMs, gapMs) {
    const end = performance.now() + capMs;
    while (animating() && performance.now() < end) {
      await new Promise(r => setTimeout(r, gapMs));
    }
    return !animating();
  }

  Object.defineProperty(window, "__drl", {
    value: {observe, resetIds, settle, editableFocused, answer: null}, enumerable: false});
})();
"""

_CLICKABLE, _FOCUSED, _EDITABLE = 1, 2, 4


#: The page variable that names the task's check while it runs (``status``, or the check's own
#: name where a suite sets it): a check stopped at its time limit is named from it.
CHECK_MARK = "window.__drlCheck"


def observe_expression(opts_json: str, status_js: str = "null") -> str:
    """The JS expression of one observation: elements plus the task's status value (computed
    first, under `CHECK_MARK`)."""
    return (
        f"(() => {{ {CHECK_MARK} = 'status'; const status = ({status_js}); {CHECK_MARK} = ''; "
        f"return window.__drl.observe({opts_json}, status); }})()"
    )


def parse_elements(records: list[list[Any]]) -> list[UIElement]:
    """Element records from `DOM_SCRIPT` -> `UIElement`s (bbox already in screen pixels)."""
    out = []
    for rec in records:
        eid, role, text, value, left, top, right, bottom, flags, attrs = rec
        out.append(
            UIElement(
                id=eid,
                role=role,
                text=text,
                value=value if isinstance(value, str) else str(value),
                bbox=(float(left), float(top), float(right), float(bottom)),
                clickable=bool(flags & _CLICKABLE),
                focused=bool(flags & _FOCUSED),
                editable=bool(flags & _EDITABLE),
                attrs=attrs,
            )
        )
    return out
