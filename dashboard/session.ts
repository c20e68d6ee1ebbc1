/**
 * The API key the operator signed in with, kept for this browser tab only
 * (sessionStorage: gone when the tab closes, never written to disk as a
 * cookie or localStorage would be, and never sent anywhere but this origin's
 * /graphql).
 */

const KEY = "floodgate.token";

export function savedToken(): string | null {
  return sessionStorage.getItem(KEY);
}

export function saveToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(KEY);
}
