"""Swipe-to-scroll inside scrollable areas, as a finger does on a phone.

Off the ``phone`` viewport a swipe is a mouse drag (so drag-and-drop, sliders and text selection
work as on a desktop), and a mouse drag does not scroll a text area or a scrolling list: only
the wheel does, and the wheel is no AitW action. On a phone a swipe that starts on scrollable
content scrolls it. `TOUCH_SCROLL_SCRIPT` (installed with the phone-style controls) does that
for drags that start inside an element that can scroll (``overflow: auto|scroll`` or a
``<textarea>``, with more content than fits) and not on something draggable (jQuery UI
draggables, sortables, sliders, resize handles, ``draggable="true"``): the content follows the
pointer, no text is selected, a link or image it starts on is not dragged away (a desktop
browser's native drag-and-drop), and the click that would end the drag is dropped. Taps, and
drags on everything else, are unchanged; the picker's list scrolls by its own handler.
"""

from __future__ import annotations

TOUCH_SCROLL_SCRIPT = r"""
(() => {
  if (window.__drlTouchScroll) return;
  const add = EventTarget.prototype.addEventListener;
  const DRAGGABLE = /(^|\s)(ui-draggable|ui-sortable|ui-slider|ui-resizable-handle)(\s|$)/;
  let drag = null;  // {el, x, y, top, left, moved}

  function scroller(t) {
    for (let e = t; e && e.nodeType === 1; e = e.parentElement) {
      if (e.id === "__drl-picker") return null;
      if (e.getAttribute("draggable") === "true" || DRAGGABLE.test(e.getAttribute("class") || ""))
        return null;
      if (e === document.body || e === document.documentElement) return null;
      const st = getComputedStyle(e);
      const scrollsY = (/(auto|scroll)/.test(st.overflowY) || e.tagName === "TEXTAREA") &&
        e.scrollHeight > e.clientHeight + 1;
      const scrollsX = /(auto|scroll)/.test(st.overflowX) && e.scrollWidth > e.clientWidth + 1;
      if (scrollsY || scrollsX) return e;
    }
    return null;
  }
  add.call(window, "mousedown", (e) => {
    drag = null;
    if (e.button !== 0) return;
    const el = scroller(e.target);
    if (el) drag = {el, x: e.clientX, y: e.clientY, top: el.scrollTop, left: el.scrollLeft,
                    moved: false};
  }, true);
  add.call(window, "mousemove", (e) => {
    if (!drag || !(e.buttons & 1)) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!drag.moved && Math.max(Math.abs(dx), Math.abs(dy)) > 4) drag.moved = true;
    if (!drag.moved) return;
    drag.el.scrollTop = drag.top - dy;
    drag.el.scrollLeft = drag.left - dx;
    const sel = window.getSelection();
    if (sel) sel.removeAllRanges();
    e.preventDefault();
  }, true);
  add.call(window, "selectstart", (e) => { if (drag) e.preventDefault(); }, true);
  // a link or an image is natively draggable: its drag-and-drop would swallow the moves
  add.call(window, "dragstart", (e) => { if (drag) e.preventDefault(); }, true);
  add.call(window, "click", (e) => {
    if (drag && drag.moved) { e.preventDefault(); e.stopPropagation(); }
    drag = null;
  }, true);
  add.call(window, "mouseup", () => {
    if (drag && !drag.moved) drag = null;
  }, true);
  Object.defineProperty(window, "__drlTouchScroll", {enumerable: false, value: true});
})();
"""
