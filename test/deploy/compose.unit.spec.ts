/**
 * deploy/compose.yaml, read as Compose reads it (YAML with merge keys): every long-running role is a
 * service running `herald <role>` from the one image, after the migration completed and the brokers are
 * healthy, with the connection settings; every backing service has a health check. (No Docker engine
 * runs here, so `docker compose up` itself is not exercised; ADR 0016.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = join(import.meta.dirname, '..', '..');
const ROLES = ['api', 'scanner', 'relay', 'worker', 'tick', 'projector', 'maintenance'];

interface Service {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  deploy?: { replicas: number };
}

const compose = parse(readFileSync(join(ROOT, 'deploy', 'compose.yaml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};

describe('deploy/compose.yaml', () => {
  it.each(ROLES)(
    'runs `herald %s` from the image after the migration, with the connection settings',
    (role) => {
      const service = compose.services[role]!;
      expect(service.command).toEqual([role]);
      expect(service.image).toBe('herald:local');
      expect(service.depends_on?.migrate).toEqual({ condition: 'service_completed_successfully' });
      expect(service.depends_on?.rabbitmq).toEqual({ condition: 'service_healthy' });
      expect(Object.keys(service.environment ?? {})).toEqual(
        expect.arrayContaining(['DATABASE_URL', 'AMQP_URL', 'KAFKA_BROKERS', 'REDIS_URL']),
      );
    },
  );

  it('migrates once against a healthy database; scanners and relays run twice; backing services are checked', () => {
    expect(compose.services.migrate!.command).toEqual(['migrate']);
    expect(compose.services.migrate!.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    expect(compose.services.scanner!.deploy?.replicas).toBe(2);
    expect(compose.services.relay!.deploy?.replicas).toBe(2);
    for (const name of ['postgres', 'rabbitmq', 'redis', 'kafka']) {
      expect(compose.services[name]!.healthcheck?.test.length, name).toBeGreaterThan(0);
    }
    expect(compose.services.api!.environment?.HERALD_API_HOST).toBe('0.0.0.0');
  });
});
