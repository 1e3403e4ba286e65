/**
 * Overview: dispatch throughput (dispatch_stats per hour) and due → published latency (per minute,
 * p50/p99), the outbox backlog and dead rows per destination, consumer dead letters, leases and
 * projector lag — all from GET /v1/overview, which reads projections, capped counts and bounded samples
 * (never an unbounded count). Refetched on the stream's `overview` topic (at most once a second).
 */
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router-dom';
import { api, type Schemas, unwrap, useLive } from '../api/client';
import {
  BarChart,
  Card,
  DataTable,
  ErrorBanner,
  LineChart,
  PageHeader,
  Stat,
  StatusBadge,
} from '../components';
import { browserZone, formatCount, formatDuration, formatTime, zoneAbbreviation } from '../format';
import { byDestination, DestinationTable } from './outbox-summary';

type Overview = Schemas['Overview'];

/** Lease renewed longer ago than this looks stuck (the projector renews every few seconds). */
const LEASE_STALE_SECONDS = 60;
/** Projection lag beyond this needs a look. */
const LAG_WARN_SECONDS = 30;

const hh = (d: Date) => `${String(d.getHours()).padStart(2, '0')}:00`;
const hhmm = (d: Date) =>
  `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;

/** The last 24 hours, one bucket per hour (empty hours as zero), dispatch_stats summed over destinations. */
function throughput(o: Overview) {
  const end = new Date(o.at);
  end.setUTCMinutes(0, 0, 0);
  const buckets = new Map<number, { published: number; delivered: number; failed: number; dead: number }>();
  for (let i = 23; i >= 0; i--) {
    buckets.set(end.getTime() - i * 3_600_000, { published: 0, delivered: 0, failed: 0, dead: 0 });
  }
  for (const row of o.dispatch) {
    const b = buckets.get(new Date(row.hour).getTime());
    if (!b) continue;
    b.published += row.published;
    b.delivered += row.delivered;
    b.failed += row.failed;
    b.dead += row.dead;
  }
  const keys = [...buckets.keys()];
  const values = [...buckets.values()];
  return {
    labels: keys.map((k) => hh(new Date(k))),
    published: values.map((v) => v.published),
    delivered: values.map((v) => v.delivered),
    failed: values.map((v) => v.failed + v.dead),
  };
}

/** The last 60 minutes, one point per minute (minutes without publishes left as gaps). */
function latency(o: Overview) {
  const end = new Date(o.at);
  end.setUTCSeconds(0, 0);
  const byMinute = new Map(o.latency.map((r) => [new Date(r.minute).getTime(), r]));
  const minutes = Array.from({ length: 60 }, (_, i) => end.getTime() - (59 - i) * 60_000);
  return {
    labels: minutes.map((m) => hhmm(new Date(m))),
    p50: minutes.map((m) => byMinute.get(m)?.p50Seconds ?? null),
    p99: minutes.map((m) => byMinute.get(m)?.p99Seconds ?? null),
    published: minutes.map((m) => byMinute.get(m)?.published ?? 0),
  };
}

export function Overview() {
  const overview = useQuery({
    queryKey: ['overview'],
    queryFn: () => unwrap(api.GET('/v1/overview')),
  });
  useLive(['overview'], () => void overview.refetch());
  const o = overview.data;

  if (!o) {
    return (
      <>
        <PageHeader title="Overview" />
        <ErrorBanner error={overview.error} />
        {overview.isPending ? <div className="muted">Loading…</div> : null}
      </>
    );
  }

  const t = throughput(o);
  const l = latency(o);
  // The charts label hours and minutes on the browser's clock: say which.
  const zone = zoneAbbreviation(new Date(o.at), browserZone());
  const destinations = byDestination(o.outbox);
  const pendingTotal = o.outbox.pending.reduce((n, d) => n + d.rows, 0);
  const oldest = o.outbox.pending.reduce((m, d) => Math.max(m, d.oldestAgeSeconds), 0);
  const deadTotal = o.outbox.dead.reduce((n, d) => n + d.rows, 0);
  const lettersTotal = o.deadLetters.consumers.reduce((n, c) => n + c.dead, 0);
  const publishedHour = l.published.reduce((n, v) => n + v, 0);
  const recent = o.latency.filter((r) => r.published > 0);
  const p99Hour = recent.length ? Math.max(...recent.map((r) => r.p99Seconds)) : null;
  const maxLag = o.projections.reduce((m, p) => Math.max(m, p.lagSeconds), 0);
  const unhealthyLeases = o.leases.filter((x) => !x.held || x.ageSeconds > LEASE_STALE_SECONDS).length;

  return (
    <>
      <PageHeader title="Overview" subtitle={`as of ${formatTime(o.at)} (database time)`} />
      <ErrorBanner error={overview.error} />
      <div className="stats">
        <Stat label="Published, last hour" value={formatCount(publishedHour)} testId="stat-published" />
        <Stat
          label="Due → published p99"
          value={p99Hour === null ? '—' : formatDuration(p99Hour)}
          hint="worst minute, last hour"
          tone={p99Hour !== null && p99Hour > 5 ? 'warn' : undefined}
        />
        <Stat
          label="Outbox pending"
          value={`${formatCount(pendingTotal)}${o.outbox.pendingCapped ? '+' : ''}`}
          hint={pendingTotal ? `oldest ${formatDuration(oldest)}` : 'nothing waiting'}
          tone={oldest > 60 ? 'warn' : undefined}
          testId="stat-pending"
        />
        <Stat
          label="Dead rows"
          value={`${formatCount(deadTotal)}${o.outbox.deadCapped ? '+' : ''}`}
          hint={<Link to="/outbox">open the outbox</Link>}
          tone={deadTotal ? 'bad' : 'ok'}
          testId="stat-dead"
        />
        <Stat
          label="Parked keys"
          value={formatCount(o.outbox.parkedKeys)}
          tone={o.outbox.parkedKeys ? 'warn' : 'ok'}
        />
        <Stat
          label="Consumer dead letters"
          value={`${formatCount(lettersTotal)}${o.deadLetters.capped ? '+' : ''}`}
          tone={lettersTotal ? 'bad' : 'ok'}
          testId="stat-dead-letters"
        />
        <Stat
          label="Projector lag"
          value={formatDuration(maxLag)}
          tone={maxLag > LAG_WARN_SECONDS ? 'bad' : 'ok'}
          hint={unhealthyLeases ? `${unhealthyLeases} lease(s) not healthy` : 'leases healthy'}
        />
      </div>

      <div className="grid grid-2">
        <Card
          title="Dispatch throughput (messages per hour, last 24 h)"
          actions={<span className="muted small-text">hours in {zone}</span>}
        >
          <BarChart
            label="dispatch throughput"
            labels={t.labels}
            stacked
            series={[
              { label: 'published', data: t.published, color: '#2563eb', stack: 'a' },
              { label: 'delivered', data: t.delivered, color: '#16a34a', stack: 'b' },
              { label: 'failed / dead', data: t.failed, color: '#dc2626', stack: 'b' },
            ]}
          />
        </Card>
        <Card
          title="Due → published latency (per minute, last hour)"
          actions={<span className="muted small-text">times in {zone}</span>}
        >
          <LineChart
            label="due to published latency"
            labels={l.labels}
            formatY={(v) => formatDuration(v)}
            series={[
              { label: 'p50', data: l.p50, color: '#2563eb' },
              { label: 'p99', data: l.p99, color: '#d97706', dashed: true },
            ]}
          />
        </Card>
      </div>

      <div className="grid grid-2" style={{ marginTop: 14 }}>
        <Card title="Outbox by destination" actions={<Link to="/outbox">Outbox →</Link>}>
          <DestinationTable label="outbox-by-destination" rows={destinations} />
        </Card>
        <Card title="Consumer dead letters">
          <DataTable
            label="dead-letters"
            rows={o.deadLetters.consumers}
            rowKey={(c) => c.consumer}
            empty="No consumer gave up on a message."
            columns={[
              { key: 'consumer', header: 'Consumer', mono: true },
              {
                key: 'dead',
                header: 'Dead',
                align: 'right',
                render: (c) => <span className="text-bad">{formatCount(c.dead)}</span>,
              },
              { key: 'lastAt', header: 'Last', className: 'nowrap', render: (c) => formatTime(c.lastAt) },
            ]}
          />
        </Card>
        <Card title="Leases">
          <DataTable
            label="leases"
            rows={o.leases}
            rowKey={(x) => x.name}
            empty="No leases taken yet."
            columns={[
              { key: 'name', header: 'Lease', mono: true },
              { key: 'owner', header: 'Owner', mono: true },
              {
                key: 'age',
                header: 'Renewed',
                align: 'right',
                render: (x) => `${formatDuration(x.ageSeconds)} ago`,
              },
              {
                key: 'held',
                header: 'State',
                render: (x) => (
                  <StatusBadge
                    status={!x.held ? 'released' : x.ageSeconds > LEASE_STALE_SECONDS ? 'stale' : 'healthy'}
                    tone={!x.held ? 'muted' : x.ageSeconds > LEASE_STALE_SECONDS ? 'warn' : 'ok'}
                  />
                ),
              },
            ]}
          />
        </Card>
        <Card title="Projections">
          <DataTable
            label="projections"
            rows={o.projections}
            rowKey={(p) => `${p.name}:${p.source}`}
            empty="No projections registered."
            columns={[
              { key: 'name', header: 'Projection', mono: true },
              { key: 'source', header: 'Reads' },
              { key: 'lag', header: 'Lag', align: 'right', render: (p) => formatDuration(p.lagSeconds) },
              {
                key: 'state',
                header: 'State',
                render: (p) => (
                  <StatusBadge
                    status={!p.present ? 'missing' : p.lagSeconds > LAG_WARN_SECONDS ? 'lagging' : 'healthy'}
                    tone={!p.present ? 'warn' : p.lagSeconds > LAG_WARN_SECONDS ? 'bad' : 'ok'}
                  />
                ),
              },
            ]}
          />
        </Card>
      </div>
    </>
  );
}
