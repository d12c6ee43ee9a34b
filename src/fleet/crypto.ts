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
  createSecretKey,
  hkdfSync,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { hashTagged } from './lua.js';

const SALT = 'oauth-sidecar token store v1';
// v2: the generation is part of the associated data (v1 entries read as unreadable: one grant).
const VERSION = 'v2';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Who shares an entry: every sidecar with the same token URL, client id and scopes. */
export interface EntryIdentity {
  keyPrefix: string;
  /** Redis Cluster: the entry and its lease share one hash tag (one slot, one node). */
  hashTags?: boolean;
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
  seal: KeyObject;
  /** HMAC key for access-token fingerprints (compare-and-delete without decrypting in Lua). */
  fingerprint: KeyObject;
}

/**
 * A 256-bit key for `purpose` (its HKDF label), from the client secret and the token URL. A
 * KeyObject, made once: node:crypto checks and copies a Buffer key on every HMAC and cipher made
 * with it, a KeyObject it takes as is (docs/token-store.md "How it works").
 */
function deriveKey(clientSecret: string, tokenUrl: string, purpose: string): KeyObject {
  return createSecretKey(
    Buffer.from(hkdfSync('sha256', clientSecret, SALT, `${purpose}\0${tokenUrl}`, 32)),
  );
}

/** Derive the entry's names and keys. Pure; cache the result per credentials. */
export function deriveEntryKeys(identity: EntryIdentity): EntryKeys {
  const name = createHash('sha256')
    .update(
      [identity.tokenUrl, identity.clientId, [...identity.scopes].sort().join(' ')].join('\0'),
    )
    .digest('hex')
    .slice(0, 32);
  const derive = (purpose: string): KeyObject =>
    deriveKey(identity.clientSecret, identity.tokenUrl, purpose);
  const tagged = hashTagged(name, identity.hashTags === true);
  return {
    entry: `${identity.keyPrefix}token:${tagged}`,
    lease: `${identity.keyPrefix}lease:${tagged}`,
    seal: derive('aes-256-gcm'),
    fingerprint: derive('fingerprint'),
  };
}

/**
 * The response cache's keys (docs/response-cache.md "Shared tier"): names are HMACs, so the store
 * holds no path or query and a reader without the secret cannot test a guess; values are sealed
 * under a key of their own (its own HKDF label: a cache entry never opens as a token set).
 */
export interface CacheKeys {
  names: KeyObject;
  seal: KeyObject;
}

export function deriveCacheKeys(clientSecret: string, tokenUrl: string): CacheKeys {
  return {
    names: deriveKey(clientSecret, tokenUrl, 'response-cache names'),
    seal: deriveKey(clientSecret, tokenUrl, 'response-cache aes-256-gcm'),
  };
}

/** A store-safe name for `text` (a path, a cache key): 32 hex characters of its HMAC. */
export function hashedName(keys: CacheKeys, text: string): string {
  return createHmac('sha256', keys.names).update(text).digest('hex').slice(0, 32);
}

/** `<iv>.<ciphertext+tag>` (base64url) under AES-256-GCM, bound to `aad`. */
export function seal(key: KeyObject, aad: string, plaintext: Buffer | string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return `${iv.toString('base64url')}.${body.toString('base64url')}`;
}

/** The plaintext of {@link seal}'s output, or undefined: another key or `aad`, or corrupted. */
export function unseal(key: KeyObject, aad: string, sealed: string): Buffer | undefined {
  const [ivText, bodyText, extra] = sealed.split('.');
  if (ivText === undefined || bodyText === undefined || extra !== undefined) return undefined;
  return unsealParts(key, aad, ivText, bodyText);
}

/** {@link unseal} of a value already split at its dot: `<iv>` and `<ciphertext+tag>`. */
export function unsealParts(
  key: KeyObject,
  aad: string,
  ivText: string,
  bodyText: string,
): Buffer | undefined {
  const iv = Buffer.from(ivText, 'base64url');
  const body = Buffer.from(bodyText, 'base64url');
  if (iv.length !== IV_BYTES || body.length < TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    const plaintext = decipher.update(body.subarray(0, body.length - TAG_BYTES));
    decipher.final(); // GCM returns nothing more; it checks the tag (throws when it differs)
    return plaintext;
  } catch {
    return undefined;
  }
}

/**
 * Associated data: the entry key and the generation. Entries cannot be swapped, and a sealed value
 * cannot be given another generation (an old entry relabelled as new opens as unreadable).
 */
function associatedData(keys: EntryKeys, generation: number): string {
  return `${keys.entry}\0${generation}`;
}

/** `v2.<iv>.<ciphertext+tag>` (base64url), bound to the entry key and `generation`. */
export function sealValue(keys: EntryKeys, plaintext: string, generation: number): string {
  return `${VERSION}.${seal(keys.seal, associatedData(keys, generation), plaintext)}`;
}

/**
 * The plaintext, or undefined when the value was sealed under another secret or another
 * generation, or is corrupted.
 */
export function openValue(keys: EntryKeys, sealed: string, generation: number): string | undefined {
  if (!sealed.startsWith(`${VERSION}.`)) return undefined;
  return unseal(
    keys.seal,
    associatedData(keys, generation),
    sealed.slice(VERSION.length + 1),
  )?.toString('utf8');
}

/** A keyed fingerprint of an access token: equal tokens match, and it reveals nothing without the secret. */
export function tokenFingerprint(keys: EntryKeys, accessToken: string): string {
  return createHmac('sha256', keys.fingerprint)
    .update(accessToken)
    .digest('base64url')
    .slice(0, 32);
}

/** The client's credentials as the secret files hold them now. */
export type IdentityReader = () => Promise<{ clientId: string; clientSecret: string }>;

/** Credentials are read again at most this often (a rotation applies within a second). */
const IDENTITY_REUSE_MS = 1_000;

/**
 * Keys derived from the current credentials, re-derived only when they change. Read again at
 * most once a second: a follower polling every 100 ms need not re-read the Secret files each time.
 */
export class IdentityKeys<K> {
  #cached: { id: string; secret: string; keys: K; readAt: number } | undefined;

  constructor(
    private readonly read: IdentityReader,
    private readonly now: () => number,
    private readonly derive: (identity: { clientId: string; clientSecret: string }) => K,
  ) {}

  async get(): Promise<K> {
    const now = this.now();
    const cached = this.#cached;
    if (cached !== undefined && now - cached.readAt < IDENTITY_REUSE_MS) return cached.keys;
    const identity = await this.read();
    if (cached?.id === identity.clientId && cached.secret === identity.clientSecret) {
      cached.readAt = now;
      return cached.keys;
    }
    const keys = this.derive(identity);
    this.#cached = { id: identity.clientId, secret: identity.clientSecret, keys, readAt: now };
    return keys;
  }
}
