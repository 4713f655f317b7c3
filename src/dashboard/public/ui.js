// Small DOM helpers: every control gets a visible label, tables a caption and header cells, errors role=alert.

let counter = 0;
export const uid = (prefix) => `${prefix}-${++counter}`;

/** An element: `attrs` are attributes, `on*` functions become listeners, `text` sets textContent. */
export function h(tag, attrs = {}, ...children) {
  const svg = ['svg', 'rect', 'text', 'g', 'line', 'title', 'desc'].includes(tag);
  const node = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = String(value);
    else if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** A labelled control: `kind` is input (default), select (with `options`), textarea or checkbox. */
export function field(label, name, { kind = 'input', type = 'text', value = '', options = [], required = false, hint, ...rest } = {}) {
  const id = uid(name);
  const hintId = hint ? `${id}-hint` : undefined;
  let control;
  if (kind === 'select') {
    control = h('select', { id, name, required, 'aria-describedby': hintId, ...rest }, options.map((option) => {
      const [optionValue, text] = Array.isArray(option) ? option : [option, option];
      return h('option', { value: optionValue, selected: optionValue === value, text });
    }));
  } else if (kind === 'textarea') {
    control = h('textarea', { id, name, required, spellcheck: 'false', 'aria-describedby': hintId, ...rest });
    control.value = value;
  } else {
    control = h('input', { id, name, type, required, 'aria-describedby': hintId, autocomplete: 'off', ...rest });
    if (type === 'checkbox') control.checked = Boolean(value);
    else control.value = value;
  }
  return h('div', { class: 'field' }, h('label', { for: id, text: label }), control, hint ? h('span', { id: hintId, class: 'muted', text: hint }) : null);
}

/** The form's values by name (checkboxes as booleans). */
export function valuesOf(form) {
  const values = {};
  for (const element of form.elements) {
    if (!element.name) continue;
    values[element.name] = element.type === 'checkbox' ? element.checked : element.value;
  }
  return values;
}

/** What went wrong, for a person: the detail, and each field error. */
export function problemText(error) {
  const fields = (error.errors ?? []).map((e) => `${e.field}: ${e.message}`);
  return [error.message, ...fields].join('\n');
}

export function errorBox(error) {
  return h('pre', { class: 'error', role: 'alert', text: problemText(error) });
}

/** A form whose submit runs `action(values)`; a failure shows under it and the button is usable again. */
export function form(label, fields, submit, action, { inline = false } = {}) {
  const errors = h('div');
  const button = h('button', { type: 'submit', text: submit });
  const node = h('form', { class: inline ? 'inline' : '', 'aria-label': label }, fields, h('div', {}, button), errors);
  node.addEventListener('submit', async (event) => {
    event.preventDefault();
    clear(errors);
    button.disabled = true;
    try {
      await action(valuesOf(node), node);
    } catch (error) {
      errors.append(errorBox(error));
    } finally {
      button.disabled = false;
    }
  });
  return node;
}

export function button(text, action, { kind = '', label, errorsInto } = {}) {
  const node = h('button', { type: 'button', class: kind, text, 'aria-label': label });
  node.addEventListener('click', async () => {
    node.disabled = true;
    try {
      await action();
    } catch (error) {
      (errorsInto ?? node.parentElement)?.append(errorBox(error));
    } finally {
      if (node.isConnected) node.disabled = false;
    }
  });
  return node;
}

/** A table: `columns` are `[header, row => cell]`. */
export function table(caption, columns, rows, empty = 'Nothing yet.') {
  if (rows.length === 0) return h('p', { class: 'muted', text: `${caption}: ${empty}` });
  return h(
    'table',
    {},
    h('caption', { text: caption }),
    h('thead', {}, h('tr', {}, columns.map(([header]) => h('th', { scope: 'col', text: header })))),
    h('tbody', {}, rows.map((row) => h('tr', {}, columns.map(([, cell]) => h('td', {}, cell(row) ?? ''))))),
  );
}

/** Secrets shown once: read-only fields to copy, gone from the page once dismissed (nothing keeps them). */
export function secretsPanel(title, entries) {
  const heading = h('h2', { tabindex: '-1', text: title });
  const panel = h(
    'section',
    { class: 'panel secret', 'aria-label': title },
    heading,
    h('p', { text: 'Shown once: copy them now. pgward keeps only hashes and cannot show them again.' }),
    entries.map(([label, value, name]) => field(label, name, { value, readonly: true, 'data-secret': name })),
    h('button', { type: 'button', class: 'secondary', text: 'I have saved them', onclick: () => panel.remove() }),
  );
  queueMicrotask(() => heading.focus());
  return panel;
}

export function announce(message) {
  const status = document.getElementById('status');
  if (status) status.textContent = message;
}

export const when = (iso) => (iso ? new Date(iso).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');
export const code = (text) => h('code', { text });
