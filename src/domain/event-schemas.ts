/**
 * Event schema versions and upcasters (ADR 0039, zero-downtime upgrades). Every stored event carries
 * the schema version of its `data` (`event.schema_version`, 1 for everything written before versions
 * existed). An aggregate declares, once, an upcaster per change of one event type's shape (`from` n to
 * n + 1); every reader of the log — replay, verify, the sandbox, projections, export, a service's
 * history — runs a stored event through the chain, so the decider's `evolve` only ever sees the current
 * shape and invariant 8 holds across versions. A version newer than this release reads is refused
 * (UnsupportedEventVersionError), never folded as if it were known.
 *
 * The rollout rule: a release writes a version only if the release before it reads that version. A
 * release that introduces a shape therefore first reads it and keeps writing the old one (`writes`
 * pins the version, and a `down` converts the decider's current shape to it); the next release drops
 * the pin. test/upgrade/ checks the rule against the previous release's snapshot.
 */
import { HeraldError, ValidationError } from '../errors.js';

/** Converts one event type's `data` from version `from` to `from + 1`. */
export interface EventUpcaster {
  readonly type: string;
  readonly from: number;
  up(data: unknown): unknown;
}

/** Converts one event type's current `data` down to version `to`, for a release that still writes it. */
export interface EventDowncaster {
  readonly type: string;
  readonly to: number;
  down(data: unknown): unknown;
}

export interface EventSchemaDeclaration {
  readonly upcasters?: readonly EventUpcaster[];
  /**
   * Versions still written, per event type, when lower than the version read: a release that reads a
   * new shape before the previous release can (the rollout rule). Each needs a `downcasters` entry.
   */
  readonly writes?: Readonly<Record<string, number>>;
  readonly downcasters?: readonly EventDowncaster[];
}

/** A stored event's type, data and schema version (as read from the log). */
export interface VersionedEventData {
  readonly type: string;
  readonly data: unknown;
  readonly schemaVersion: number;
}

/** An event from the log in a version this release cannot read (a newer release wrote it). */
export class UnsupportedEventVersionError extends HeraldError {
  constructor(streamType: string, type: string, version: number, reads: number) {
    super(
      'UNSUPPORTED_VERSION',
      `${streamType} event ${type} has schema version ${version}; this release reads up to ${reads} (a newer release wrote it: upgrade this one)`,
      { streamType, type, version, reads },
    );
  }
}

/** One stream type's event schemas: the versions it reads and writes, and the conversions between. */
export class EventSchemas {
  private readonly chains = new Map<string, ((data: unknown) => unknown)[]>();
  private readonly downs = new Map<string, ((data: unknown) => unknown)[]>();
  private readonly writing = new Map<string, number>();

  constructor(
    readonly streamType: string,
    declaration: EventSchemaDeclaration = {},
  ) {
    const byType = new Map<string, EventUpcaster[]>();
    for (const u of declaration.upcasters ?? []) byType.set(u.type, [...(byType.get(u.type) ?? []), u]);
    for (const [type, list] of byType) {
      const sorted = [...list].sort((a, b) => a.from - b.from);
      sorted.forEach((u, i) => {
        if (u.from !== i + 1) {
          throw new ValidationError(
            `${streamType} event ${type}: upcasters must go 1→2, 2→3, … without gaps or repeats (found one from ${u.from} at step ${i + 1})`,
            { streamType, type },
          );
        }
      });
      this.chains.set(
        type,
        sorted.map((u) => u.up),
      );
    }
    for (const [type, version] of Object.entries(declaration.writes ?? {})) {
      const reads = this.reads(type);
      if (!Number.isInteger(version) || version < 1 || version > reads) {
        throw new ValidationError(
          `${streamType} event ${type}: writes version ${version}, reads 1 to ${reads}`,
          {
            streamType,
            type,
          },
        );
      }
      const steps: ((data: unknown) => unknown)[] = [];
      for (let to = reads - 1; to >= version; to--) {
        const d = declaration.downcasters?.find((c) => c.type === type && c.to === to);
        if (!d) {
          throw new ValidationError(
            `${streamType} event ${type}: writes version ${version} but has no downcaster to ${to}`,
            { streamType, type },
          );
        }
        steps.push(d.down);
      }
      this.writing.set(type, version);
      this.downs.set(type, steps);
    }
  }

  /** The highest version of an event type this release reads (1 without upcasters). */
  reads(type: string): number {
    return (this.chains.get(type)?.length ?? 0) + 1;
  }

  /** The version this release writes an event type in. */
  writes(type: string): number {
    return this.writing.get(type) ?? this.reads(type);
  }

  /** Event types with more than one version, and the highest version read of each. */
  readVersions(): Record<string, number> {
    return Object.fromEntries([...this.chains.keys()].sort().map((type) => [type, this.reads(type)]));
  }

  /** Event types with more than one version, and the version written of each. */
  writeVersions(): Record<string, number> {
    return Object.fromEntries([...this.chains.keys()].sort().map((type) => [type, this.writes(type)]));
  }

  /** A stored event's data in the current shape; refuses a version newer than this release reads. */
  upcast(event: VersionedEventData): unknown {
    const reads = this.reads(event.type);
    if (event.schemaVersion > reads || event.schemaVersion < 1) {
      throw new UnsupportedEventVersionError(this.streamType, event.type, event.schemaVersion, reads);
    }
    const chain = this.chains.get(event.type) ?? [];
    let data = event.data;
    for (let v = event.schemaVersion; v < reads; v++) data = chain[v - 1]!(data);
    return data;
  }

  /** The event with its data in the current shape and the current version (unchanged when current). */
  current<E extends { readonly type: string; readonly data: unknown; readonly schemaVersion?: number }>(
    event: E,
  ): E {
    const schemaVersion = event.schemaVersion ?? 1;
    const reads = this.reads(event.type);
    if (schemaVersion === reads) return event;
    return {
      ...event,
      data: this.upcast({ type: event.type, data: event.data, schemaVersion }),
      schemaVersion: reads,
    };
  }

  /** What is stored for an event the decider produced (current shape): its data and schema version. */
  encode(event: { type: string; data: unknown }): { data: unknown; schemaVersion: number } {
    const steps = this.downs.get(event.type) ?? [];
    let data = event.data;
    for (const down of steps) data = down(data);
    return { data, schemaVersion: this.writes(event.type) };
  }
}

/** Schemas for a stream type that declares none: every event type at version 1. */
export const noEventSchemas = (streamType: string) => new EventSchemas(streamType);
