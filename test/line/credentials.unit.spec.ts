/**
 * Sealed LINE credentials (ADR 0021): AES-256-GCM under the key ring's current key, bound to the
 * official account (AAD), opened by any key of the ring, refused with a message that names the key id
 * and never the secret.
 */
import { createSecretKey, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openSecret, sealedKeyId, sealSecret } from '../../src/aggregates/campaign/line/credentials.js';
import type { LineKeyRing } from '../../src/aggregates/campaign/line/settings.js';
import { PermanentError } from '../../src/errors.js';

function ring(current: string, ...old: [string, Buffer][]): LineKeyRing & { raw: Buffer } {
  const raw = randomBytes(32);
  const key = createSecretKey(raw);
  const keys = new Map([[current, key], ...old.map(([id, value]) => [id, createSecretKey(value)] as const)]);
  return { current: { id: current, key }, keys, development: false, raw };
}

const SECRET = 'channel-token-0123456789';

describe('LINE credentials', () => {
  it('seals to v1:<key id>:<iv>:<tag>:<ciphertext> that never holds the secret, and opens again', () => {
    const r = ring('k1');
    const sealed = sealSecret(r, 'oa-1', SECRET);
    expect(sealed.split(':')).toHaveLength(5);
    expect(sealed.startsWith('v1:k1:')).toBe(true);
    expect(sealed).not.toContain(SECRET);
    expect(sealed).not.toContain(Buffer.from(SECRET).toString('base64url'));
    expect(sealedKeyId(sealed)).toBe('k1');
    expect(openSecret(r, 'oa-1', sealed)).toBe(SECRET);
  });

  it('uses a fresh IV each time: the same secret seals differently', () => {
    const r = ring('k1');
    expect(sealSecret(r, 'oa-1', SECRET)).not.toBe(sealSecret(r, 'oa-1', SECRET));
  });

  it("does not open under another official account (the value is bound to its row's account)", () => {
    const r = ring('k1');
    const sealed = sealSecret(r, 'oa-1', SECRET);
    expect(() => openSecret(r, 'oa-2', sealed)).toThrow(PermanentError);
    expect(() => openSecret(r, 'oa-2', sealed)).toThrow(/does not open with key 'k1'/);
  });

  it('refuses a tampered value', () => {
    const r = ring('k1');
    const parts = sealSecret(r, 'oa-1', SECRET).split(':');
    const ciphertext = Buffer.from(parts[4]!, 'base64url');
    ciphertext[0] = ciphertext[0]! ^ 1;
    parts[4] = ciphertext.toString('base64url');
    expect(() => openSecret(r, 'oa-1', parts.join(':'))).toThrow(/does not open/);
  });

  it('opens a value sealed by a retired key still in the ring; a key not in the ring is named', () => {
    const before = ring('k1');
    const sealed = sealSecret(before, 'oa-1', SECRET);
    const after = ring('k2', ['k1', before.raw]);
    expect(openSecret(after, 'oa-1', sealed)).toBe(SECRET);
    expect(sealedKeyId(sealSecret(after, 'oa-1', SECRET))).toBe('k2');
    const error = (() => {
      try {
        openSecret(ring('k3'), 'oa-1', sealed);
      } catch (e) {
        return e as PermanentError;
      }
    })();
    expect(error).toBeInstanceOf(PermanentError);
    expect(error?.message).toMatch(/sealed with key 'k1', which is not configured/);
    expect(error?.message).not.toContain(SECRET);
  });

  it('refuses a malformed value', () => {
    expect(() => openSecret(ring('k1'), 'oa-1', 'plain-token')).toThrow(/malformed/);
    expect(() => openSecret(ring('k1'), 'oa-1', 'v2:k1:a:b:c')).toThrow(/malformed/);
  });
});
