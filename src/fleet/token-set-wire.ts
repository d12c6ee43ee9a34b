/**
 * The token set as the fleet shares it, and its form inside the sealed entry value
 * (docs/token-store.md): short field names, and every field checked when it is read back.
 */

/** A token set as the fleet shares it. Lives only encrypted in the store. */
export interface SharedTokenSet {
  accessToken: string;
  refreshToken: string | undefined;
  /** When the request that obtained it was sent (ms since the epoch). */
  sentAt: number;
  lifetimeSeconds: number;
  grant: 'client_credentials' | 'refresh_token';
}

/** Short field names inside the sealed value; the store never sees them in clear anyway. */
interface WireSet {
  a: string;
  r?: string;
  s: number;
  l: number;
  g: SharedTokenSet['grant'];
}

export function toWire(set: SharedTokenSet): WireSet {
  return {
    a: set.accessToken,
    ...(set.refreshToken !== undefined && { r: set.refreshToken }),
    s: set.sentAt,
    l: set.lifetimeSeconds,
    g: set.grant,
  };
}

/** Every field checked: a value that decrypts but is not ours is as unreadable as one that does not. */
export function parseSet(plaintext: string | undefined): SharedTokenSet | undefined {
  if (plaintext === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(plaintext);
  } catch {
    return undefined;
  }
  // `null` is JSON too: reading its fields would throw where an unreadable value is a miss.
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const wire = parsed as Partial<WireSet>;
  if (
    typeof wire.a !== 'string' ||
    wire.a === '' ||
    (wire.r !== undefined && typeof wire.r !== 'string') ||
    typeof wire.s !== 'number' ||
    !Number.isFinite(wire.s) ||
    typeof wire.l !== 'number' ||
    !(wire.l >= 0) ||
    (wire.g !== 'client_credentials' && wire.g !== 'refresh_token')
  ) {
    return undefined;
  }
  return {
    accessToken: wire.a,
    refreshToken: wire.r,
    sentAt: wire.s,
    lifetimeSeconds: wire.l,
    grant: wire.g,
  };
}
