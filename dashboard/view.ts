/** One screen of the dashboard: what it shows, and how to stop its timers and subscriptions when another screen takes its place. */
export interface View {
  element: HTMLElement;
  stop(): void;
}
