// Web skills: procedurally generated pages of generic web-UI skills (tap a named element, fill
// labelled fields, tick listed boxes, open a section, pick the n-th item, search then pick,
// choose from drop-down lists). Each page defines genProblem() for MiniWoB++'s core.js (seeded
// through Math.seedrandom, so equal seeds give equal pages) and publishes WS_PLAN: the oracle's
// steps, [{tap: domId} | {type: text} | {pick: optionText} | ...], which only a demonstration
// policy reads (agents see the page).
var ws = {};

ws.WORDS = ["apple", "river", "stone", "cloud", "green", "table", "north", "paper", "glass",
  "light", "music", "ocean", "tiger", "honey", "maple", "bread", "chair", "dance", "eagle",
  "field", "grape", "heart", "island", "jelly", "kite", "lemon", "mango", "night", "olive",
  "piano", "queen", "robin", "sugar", "train", "umbrella", "violet", "wagon", "yellow", "zebra",
  "amber", "bridge", "candle", "desert", "engine", "forest", "garden", "harbor", "insect",
  "jacket", "kettle", "ladder", "marble", "needle", "orange", "pepper", "rabbit", "saddle",
  "ticket", "valley", "window", "basket", "copper", "dinner", "feather", "ginger", "hammer",
  "lantern", "meadow", "nickel", "oyster", "pillow", "quartz", "ribbon", "silver", "thunder",
  "velvet", "walnut", "anchor", "beacon", "cactus", "dragon", "falcon", "glacier", "helmet",
  "jungle", "lizard", "magnet", "pebble", "rocket", "shadow", "tunnel", "volcano", "whistle",
  "blue", "red", "gold", "salt", "snow", "rain", "wind", "fire", "leaf", "moon", "star", "sun",
  "lake", "hill", "road", "ship", "bird", "fish", "wolf", "bear", "frog", "duck", "lamp", "door",
  "book", "coin", "ring", "bell", "drum", "horn", "flag", "nest", "seed", "root", "bark", "mint",
  "plum", "pear", "corn", "rice", "milk", "soup", "cake", "tea", "cup", "jar", "box", "pen",
  "map", "key", "hat", "sock", "shoe", "coat", "bag", "net", "rope", "wire", "tile", "brick"];
ws.LABELS = ["Name", "Username", "Password", "Email", "City", "Code", "Title", "Note", "Phone",
  "Query", "Message", "First name", "Last name", "Address", "Zip", "Color", "Pet", "Movie",
  "Team", "Item", "Comment", "Tag", "Nickname", "Country", "Company", "Subject", "Author",
  "Book", "Food", "Song", "Street", "Age", "Job", "Hobby", "Website", "Key", "PIN", "Word"];
ws.BUTTONS = ["Submit", "OK", "Send", "Save", "Go", "Done", "Next", "Confirm", "Apply",
  "Continue", "Finish", "Enter", "Login", "Sign in", "Search", "Find", "Update", "Post"];
// Labels of drop-down lists (<select>), none of them a text field's label.
ws.MENU_LABELS = ["Colour", "Size", "Kind", "Style", "Flavour", "Shape", "Topic", "Group",
  "Level", "Mode", "Plan", "Category", "Amount", "Room", "Seat", "Theme", "Region", "Month",
  "Rating", "Speed", "Weight", "Length", "Material", "Pattern", "Grade", "Class", "Layout"];
// First options of a drop-down list that stand for nothing chosen yet.
ws.MENU_BLANKS = ["--", "Choose...", "Select one", "(none)", "- pick -", "Please choose"];
ws.ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"];
ws.ORDINAL_NUMS = ["1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th"];

ws.pick = function (lst) { return core.sample(lst); };
ws.chance = function (p) { return Math.random() < p; };
// k distinct items of lst, in random order
ws.pickN = function (lst, k) { return core.shuffle(lst.slice()).slice(0, k); };
ws.cap = function (s) { return s.charAt(0).toUpperCase() + s.slice(1); };

// A value to type: a word, a capitalised word, a random string, a number or two words.
ws.value = function () {
  var r = Math.random();
  if (r < 0.3) return ws.pick(ws.WORDS);
  if (r < 0.5) return ws.cap(ws.pick(ws.WORDS));
  if (r < 0.75) {
    var chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", s = "";
    var n = core.randi(2, 9);
    for (var i = 0; i < n; i++) s += chars.charAt(core.randi(0, chars.length));
    return s;
  }
  if (r < 0.88) return String(core.randi(1, 10000));
  return ws.pick(ws.WORDS) + " " + ws.pick(ws.WORDS);
};
// n distinct values
ws.values = function (n) {
  var out = [];
  while (out.length < n) {
    var v = ws.value();
    if (out.indexOf(v) < 0) out.push(v);
  }
  return out;
};
// n distinct labels
ws.labels = function (n) { return ws.pickN(ws.LABELS, n); };
// n distinct display words (capitalised at random, the same way for all)
ws.words = function (n) {
  var w = ws.pickN(ws.WORDS, n);
  var style = core.randi(0, 3);
  return w.map(function (x) {
    return style === 0 ? x : style === 1 ? ws.cap(x) : x.toUpperCase();
  });
};
ws.quote = function (s) { return ws.chance(0.85) ? '"' + s + '"' : s; };
// a value to type: quoted, or (one word, sometimes) bare
ws.quoteValue = function (v) { return v.indexOf(" ") < 0 && ws.chance(0.15) ? v : '"' + v + '"'; };
// "a", "a and b", "a, b and c" (or with "or" / commas only)
ws.list = function (items) {
  if (items.length <= 1) return items.join("");
  var last = items[items.length - 1];
  return items.slice(0, -1).join(", ") + (ws.chance(0.8) ? " and " : ", ") + last;
};

// -- building the page -----------------------------------------------------------------------
ws.nextId = 0;
ws.reset = function () {
  ws.nextId = 0;
  window.WS_PLAN = [];
  var area = document.getElementById("area");
  area.innerHTML = "";
  area.style.textAlign = ws.chance(0.2) ? "center" : "left";
  return area;
};
ws.el = function (tag, parent, text, cls) {
  var e = document.createElement(tag);
  e.id = "ws" + ws.nextId++;
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  if (parent) parent.appendChild(e);
  return e;
};
ws.tap = function (el) { window.WS_PLAN.push({tap: el.id}); };
ws.type = function (text) { window.WS_PLAN.push({type: text}); };
// Choosing option `text` of a <select>: tap the select (the browser device opens its picker,
// devicerl/envs/browser/pickers.py), then tap the picker row that shows `text` (rows have no id).
ws.choose = function (select, text) { window.WS_PLAN.push({tap: select.id}, {pick: text}); };
ws.query = function (text) { document.getElementById("query").textContent = text; };
ws.end = function (ok, reason) { core.endEpisode(ok ? 1.0 : -1.0, ok, reason); };

// A clickable control showing `text`: a button, a link, a plain span or a list item.
ws.control = function (parent, text, kind) {
  kind = kind || ws.pick(["button", "button", "link", "span"]);
  var e;
  if (kind === "button") {
    e = ws.el("button", parent, text);
  } else if (kind === "link") {
    e = ws.el("a", parent, text);
    e.href = "#";
  } else {
    e = ws.el("span", parent, text, "ws-item");
    e.style.cursor = "pointer";
    e.style.border = "1px solid #999";
    e.style.padding = "1px 3px";
  }
  e.style.margin = "2px";
  if (ws.chance(0.5)) e.style.display = "inline-block";
  return e;
};
ws.onTap = function (el, fn) {
  el.addEventListener("click", function (ev) { ev.preventDefault(); fn(); });
};

// A text field with a label (left, above, a placeholder, or none).
ws.field = function (parent, label, style) {
  var row = ws.el("div", parent);
  row.style.margin = "3px 0";
  var input = document.createElement(ws.chance(0.1) ? "textarea" : "input");
  input.id = "ws" + ws.nextId++;
  if (input.tagName === "INPUT") input.type = /password|pin/i.test(label || "") ? "password" : "text";
  input.style.width = "90px";
  ws.label(row, label, style);
  if (style === "placeholder") input.placeholder = label;
  row.appendChild(input);
  return input;
};

// A field's label in `row` when `style` puts it left of the field or above it (else nothing).
ws.label = function (row, label, style) {
  if (style !== "left" && style !== "above") return;
  var lab = ws.el(ws.chance(0.7) ? "label" : "span", row, ws.chance(0.3) ? label + ":" : label);
  if (ws.chance(0.5)) lab.className = "bold";
  if (style === "above") ws.el("br", row);
  else lab.style.marginRight = "4px";
};

// A drop-down list (<select>) of `options` (texts, in the given order) with a label (left,
// above, or none). `blank`, when given, is a first option of value "" (nothing chosen yet).
ws.menu = function (parent, label, style, options, blank) {
  var row = ws.el("div", parent);
  row.style.margin = "3px 0";
  ws.label(row, label, style);
  var select = ws.el("select", row);
  (blank ? [blank] : []).concat(options).forEach(function (text, i) {
    var option = document.createElement("option");
    option.value = blank && i === 0 ? "" : text;
    option.textContent = text;
    select.appendChild(option);
  });
  return select;
};

// -- free points, drags and keys (the reach pages, webskills-reach) ------------------------------
// The small agent's default point lattice: an 8 x 8 grid of cells over the 160 x 210 frame and
// 4 x 4 positions inside each cell, i.e. 32 x 32 points. Plans put free points on it, so the
// agent's point head expresses the oracle's taps and drags exactly.
ws.LATTICE = 32;
ws.snap = function (x, y) {
  var sx = 160 / ws.LATTICE, sy = 210 / ws.LATTICE;
  var i = Math.min(ws.LATTICE - 1, Math.max(0, Math.round(x / sx - 0.5)));
  var j = Math.min(ws.LATTICE - 1, Math.max(0, Math.round(y / sy - 0.5)));
  return [(i + 0.5) * sx, (j + 0.5) * sy];
};
// The frame point at the centre of an element's box.
ws.centre = function (el) {
  var r = el.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
};
// true when the frame point (x, y) lies in the element's box
ws.inside = function (el, x, y) {
  var r = el.getBoundingClientRect();
  return x >= r.left && x <= r.right && y >= r.top && y <= r.bottom;
};
ws.point = function (xy) { window.WS_PLAN.push({point: ws.snap(xy[0], xy[1])}); };
ws.drag = function (from, to) {
  window.WS_PLAN.push({drag: ws.snap(from[0], from[1]).concat(ws.snap(to[0], to[1]))});
};
ws.enter = function () { window.WS_PLAN.push({enter: true}); };
// A text field to type `answer` into and its submission: a button, or Enter (35 %). The episode
// succeeds when the field holds `answer`; the plan taps the field, types, submits. Returns the
// instruction's ending, which says how to submit.
ws.answerField = function (area, answer) {
  var input = ws.field(area, ws.pick(ws.LABELS), ws.pick(["left", "placeholder", "none"]));
  var enter = ws.chance(0.35), button = enter ? null : ws.el("button", area, ws.pick(ws.BUTTONS));
  var check = function () { var ok = input.value === answer; ws.end(ok, ok ? "typed" : "wrong text"); };
  if (enter) {
    input.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter") { ev.preventDefault(); check(); }
    });
  } else {
    ws.onTap(button, check);
  }
  ws.tap(input); ws.type(answer);
  if (enter) ws.enter(); else ws.tap(button);
  if (enter) return ws.pick([" and press Enter.", ", then hit Enter."]);
  var b = ws.quote(button.textContent);
  return ws.pick([" and press " + b + ".", ", then click " + b + "."]);
};
