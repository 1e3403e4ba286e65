/**
 * The outbound target allowlist of the job executors: a job must not reach internal services. A target
 * host must match HERALD_CRON_ALLOWED_HOSTS when that is set, and every address it resolves to must be
 * public unless HERALD_CRON_ALLOW_PRIVATE_TARGETS is set: private (RFC 1918, unique local), loopback,
 * link-local (cloud metadata at 169.254.169.254), carrier-grade NAT, unspecified, multicast and reserved
 * ranges are refused, IPv4-mapped IPv6 addresses by their IPv4 address. The check runs in the
 * connection's own DNS lookup (`guardedLookup`), so the address checked is the address connected to
 * (no window for DNS rebinding); a literal address is checked before connecting.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { PermanentError } from '../../errors.js';

export interface TargetPolicy {
  allowPrivateTargets: boolean;
  /** Empty: any host; otherwise exact names, or `*.example.com` for its subdomains. */
  allowedHosts: readonly string[];
}

/** A target the allowlist refused: permanent (retrying reaches the same address). */
export class TargetRefusedError extends PermanentError {}

const refused = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  refused.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  refused.addSubnet(network, prefix, 'ipv6');
}

/** Why an address may not be a job's target, or null when it may. */
export function privateAddressReason(address: string): string | null {
  const family = isIP(address);
  if (family === 0) return `'${address}' is not an IP address`;
  const mapped = family === 6 ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] : undefined;
  if (mapped) return privateAddressReason(mapped);
  if (refused.check(address, family === 4 ? 'ipv4' : 'ipv6')) {
    return `${address} is a private, loopback, link-local or reserved address`;
  }
  return null;
}

export function hostAllowed(host: string, allowedHosts: readonly string[]): boolean {
  if (allowedHosts.length === 0) return true;
  const name = host.toLowerCase().replace(/^\[|\]$/g, '');
  return allowedHosts.some((pattern) =>
    pattern.startsWith('*.')
      ? name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1
      : name === pattern,
  );
}

/** Checks a URL's host against the policy before connecting (names are checked again at their lookup). */
export function checkTarget(url: URL, policy: TargetPolicy): void {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!hostAllowed(host, policy.allowedHosts)) {
    throw new TargetRefusedError(`target refused: host ${host} is not in HERALD_CRON_ALLOWED_HOSTS`, {
      host,
    });
  }
  if (isIP(host) !== 0 && !policy.allowPrivateTargets) {
    const reason = privateAddressReason(host);
    if (reason) throw new TargetRefusedError(`target refused: ${reason}`, { host, address: host });
  }
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for net/tls.connect that resolves like the default one and refuses the connection when any
 * address is not allowed (so a name resolving to 127.0.0.1 is refused too).
 */
export function guardedLookup(policy: TargetPolicy) {
  return (hostname: string, options: { all?: boolean; family?: number }, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) {
        callback(error, []);
        return;
      }
      const list = addresses as LookupAddress[];
      if (!policy.allowPrivateTargets) {
        for (const { address } of list) {
          const reason = privateAddressReason(address);
          if (reason) {
            callback(
              new TargetRefusedError(`target refused: ${hostname} resolves to ${reason}`, {
                host: hostname,
                address,
              }) as unknown as NodeJS.ErrnoException,
              [],
            );
            return;
          }
        }
      }
      if (options.all) callback(null, list);
      else callback(null, list[0]!.address, list[0]!.family);
    });
  };
}
