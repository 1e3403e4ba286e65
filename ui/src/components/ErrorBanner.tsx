/** A failed call shown as the server said it: the problem's title, detail and field errors. */
import { ApiError } from '../api/client';

export function problemText(error: unknown): { title: string; detail?: string; fields: string[] } {
  if (error instanceof ApiError) {
    const p = error.problem;
    const fields = (p.errors ?? []).map((e) => [e.field, e.message].filter(Boolean).join(': '));
    return {
      title: `${p.title ?? 'Request failed'} (${error.status})`,
      ...(p.detail && p.detail !== p.title ? { detail: p.detail } : {}),
      fields,
    };
  }
  if (error instanceof Error) return { title: error.message, fields: [] };
  return { title: String(error), fields: [] };
}

export interface ErrorBannerProps {
  error: unknown;
  onDismiss?: () => void;
}

export function ErrorBanner({ error, onDismiss }: ErrorBannerProps) {
  if (error === null || error === undefined || error === false) return null;
  const { title, detail, fields } = problemText(error);
  return (
    <div className="error-banner" role="alert">
      <div className="error-banner-body">
        <strong>{title}</strong>
        {detail ? <span className="error-detail">{detail}</span> : null}
        {fields.length > 0 ? (
          <ul>
            {fields.map((f) => (
              <li key={f}>{f}</li>
            ))}
          </ul>
        ) : null}
      </div>
      {onDismiss ? (
        <button type="button" className="link" onClick={onDismiss} aria-label="Dismiss">
          ×
        </button>
      ) : null}
    </div>
  );
}
