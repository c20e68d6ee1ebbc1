/** Building the page without a framework: elements from a tag, properties and children, and a few helpers every view shares. */

type Child = Node | string | number | null | undefined | false;

type Props<K extends keyof HTMLElementTagNameMap> = Partial<Omit<HTMLElementTagNameMap[K], "style" | "dataset">> & {
  /** Attributes set as they are (aria-*, data-*, for, role). */
  attrs?: Record<string, string>;
};

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props<K> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  const { attrs, ...rest } = props;
  Object.assign(element, rest);
  for (const [name, value] of Object.entries(attrs ?? {})) element.setAttribute(name, value);
  element.append(...nodes(children));
  return element;
}

function nodes(children: Child[]): (Node | string)[] {
  return children.filter((c): c is Node | string | number => c !== null && c !== undefined && c !== false).map((c) => (typeof c === "number" ? String(c) : c));
}

/** Replaces what an element shows. */
export function show(parent: Element, ...children: Child[]): void {
  parent.replaceChildren(...nodes(children));
}

let ids = 0;

/** A labelled control: the label names it for screen readers and takes clicks; `hint` and the error slot are described by it. */
export function field(label: string, control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, hint?: string): { row: HTMLElement; error: HTMLElement } {
  const id = control.id || `f${++ids}`;
  control.id = id;
  const error = h("p", { className: "field-error", id: `${id}-error`, attrs: { "aria-live": "polite" } });
  const describedBy = [`${id}-error`];
  const hintNode = hint ? h("p", { className: "hint", id: `${id}-hint` }, hint) : null;
  if (hintNode) describedBy.push(hintNode.id);
  control.setAttribute("aria-describedby", describedBy.join(" "));
  return { row: h("div", { className: "field" }, h("label", { htmlFor: id }, label), control, hintNode, error), error };
}

export function select(options: readonly (string | [value: string, label: string])[], value = ""): HTMLSelectElement {
  const element = h("select");
  for (const option of options) {
    const [optionValue, label] = typeof option === "string" ? [option, option] : option;
    element.append(h("option", { value: optionValue }, label));
  }
  element.value = value;
  return element;
}

export function formatTime(iso: string): string {
  return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function formatNumber(n: number): string {
  return n.toLocaleString("en");
}
