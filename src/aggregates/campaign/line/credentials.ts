/**
 * Sealing of LINE channel secrets (ADR 0021): AES-256-GCM with a fresh 96-bit IV per value, the channel's
 * official-account id as additional authenticated data (a sealed token copied to another channel's row
 * does not open), and the sealing key's id stored with the value (`v1:<key id>:<iv>:<tag>:<ciphertext>`,
 * base64url parts), so a rotation re-seals rows one by one while old keys still open the rest. A value
 * that does not open (wrong key, tampered, another channel's) is a PermanentError naming the key id,
 * never the secret.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { PermanentError } from '../../../errors.js';
import type { LineKeyRing } from './settings.js';

const VERSION = 'v1';
const IV_BYTES = 12;

export function sealSecret(ring: LineKeyRing, lineOaId: string, secret: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', ring.current.key, iv);
  cipher.setAAD(Buffer.from(lineOaId, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return [VERSION, ring.current.id, iv, cipher.getAuthTag(), ciphertext]
    .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
    .join(':');
}

/** The id of the key that sealed `sealed` (a rotation re-seals values whose id is not the current one). */
export function sealedKeyId(sealed: string): string {
  return sealed.split(':')[1] ?? '';
}

export function openSecret(ring: LineKeyRing, lineOaId: string, sealed: string): string {
  const parts = sealed.split(':');
  const [version, keyId, iv, tag, ciphertext] = parts;
  if (parts.length !== 5 || version !== VERSION || !keyId || !iv || !tag || ciphertext === undefined) {
    throw new PermanentError(`LINE channel ${lineOaId}: a sealed credential is malformed`);
  }
  const key = ring.keys.get(keyId);
  if (!key) {
    throw new PermanentError(
      `LINE channel ${lineOaId}: its credentials are sealed with key '${keyId}', which is not configured (HERALD_LINE_CREDENTIALS_KEY / _OLD_KEYS)`,
      { keyId },
    );
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(lineOaId, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    throw new PermanentError(
      `LINE channel ${lineOaId}: a sealed credential does not open with key '${keyId}'`,
      {
        keyId,
      },
    );
  }
}
