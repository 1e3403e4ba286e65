/** `/cron-runs/:id`: a run by its id (an outbox row links here) opens its job's page with the run shown. */
import { useQuery } from '@tanstack/react-query';
import { Navigate, useParams } from 'react-router-dom';
import { api, unwrap } from '../api/client';
import { ErrorBanner } from '../components';

export function CronRun() {
  const { id } = useParams() as { id: string };
  const run = useQuery({
    queryKey: ['cron-runs', id],
    queryFn: () => unwrap(api.GET('/v1/cron-runs/{id}', { params: { path: { id } } })),
  });
  if (run.error) return <ErrorBanner error={run.error} />;
  if (!run.data) return <p className="muted">Loading…</p>;
  return <Navigate to={`/cron/${run.data.jobId}?run=${encodeURIComponent(id)}`} replace />;
}
