/**
 * Names and sealing of token-set entries (docs/token-store.md): the key is the prefix
 * plus a hash of token URL, client id and scopes (no secret, no readable client id); the value is
 * AES-256-GCM under a key derived with HKDF-SHA256 from the client secret and the token URL, so a
 * reader of the store without the client secret learns nothing usable.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  hkdfSync,
  randomBytes,
} from 'node:crypto';

const SALT = 'oauth-sidecar token store v1';
// v2: the generation is part of the associated data (v1 entries read as unreadable: one grant).
const VERSION = 'v2';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Who shares an entry: every sidecar with the same token URL, client id and scopes. */
export interface EntryIdentity {
  keyPrefix: string;
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  scopes: readonly string[];
}

export interface EntryKeys {
  /** Redis key of the token-set entry. */
  entry: string;
  /** Redis key of the renewal lease. */
  lease: string;
  /** AES-256-GCM key. */
  seal: Buffer;
  /** HMAC key for access-token fingerprints (compare-and-delete without decrypting in Lua). */
  fingerprint: Buffer;
}

/** Derive the entry's names and keys. Pure; cache the result per credentials. */
export function deriveEntryKeys(identity: EntryIdentity): EntryKeys {
  const name = createHash('sha256')
    .update(
      [identity.tokenUrl, identity.clientId, [...identity.scopes].sort().join(' ')].join('\0'),
    )
    .digest('hex')
    .slice(0, 32);
  const derive = (purpose: string): Buffer =>
    Buffer.from(
      hkdfSync('sha256', identity.clientSecret, SALT, `${purpose}\0${identity.tokenUrl}`, 32),
    );
  return {
    entry: `${identity.keyPrefix}token:${name}`,
    lease: `${identity.keyPrefix}lease:${name}`,
    seal: derive('aes-256-gcm'),
    fingerprint: derive('fingerprint'),
  };
}

/**
 * Associated data: the entry key and the generation. Entries cannot be swapped, and a sealed value
 * cannot be given another generation (an old entry relabelled as new opens as unreadable).
 */
function associatedData(keys: EntryKeys, generation: number): Buffer {
  return Buffer.from(`${keys.entry}\0${generation}`);
}

/** `v2.<iv>.<ciphertext+tag>` (base64url), bound to the entry key and `generation`. */
export function sealValue(keys: EntryKeys, plaintext: string, generation: number): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keys.seal, iv);
  cipher.setAAD(associatedData(keys, generation));
  const body = Buffer.concat([
    cipher.update(plaintext, 'utf8'),
    cipher.final(),
    cipher.getAuthTag(),
  ]);
  return `${VERSION}.${iv.toString('base64url')}.${body.toString('base64url')}`;
}

/**
 * The plaintext, or undefined when the value was sealed under another secret or another
 * generation, or is corrupted.
 */
export function openValue(keys: EntryKeys, sealed: string, generation: number): string | undefined {
  const [version, ivText, bodyText] = sealed.split('.');
  if (version !== VERSION || ivText === undefined || bodyText === undefined) return undefined;
  const iv = Buffer.from(ivText, 'base64url');
  const body = Buffer.from(bodyText, 'base64url');
  if (iv.length !== IV_BYTES || body.length < TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keys.seal, iv);
    decipher.setAAD(associatedData(keys, generation));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(body.subarray(0, body.length - TAG_BYTES)),
      decipher.final(),
    ]).toString('utf8');
  } catch {
    return undefined;
  }
}

/** A keyed fingerprint of an access token: equal tokens match, and it reveals nothing without the secret. */
export function tokenFingerprint(keys: EntryKeys, accessToken: string): string {
  return createHmac('sha256', keys.fingerprint)
    .update(accessToken)
    .digest('base64url')
    .slice(0, 32);
}
