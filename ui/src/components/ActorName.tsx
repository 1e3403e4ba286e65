/**
 * An event's actor for people: an API key of the organization by its name (the raw `api-key:<id>` on
 * hover), an OpenID Connect token's subject (`oidc:<sub>`) by the name its token carried, anything else
 * (a pod, the scanner, a CLI user) as recorded.
 */
import { useActor } from '../api/client';

export function ActorName({ actor }: { actor: string | null | undefined }) {
  const found = useActor(actor);
  if (!actor) return <span className="muted">unknown actor</span>;
  const isKey = actor.startsWith('api-key:');
  if (actor.startsWith('oidc:') && found?.name) {
    return (
      <span className="actor-name" title={actor} data-testid="actor-name">
        {found.name}
        {found.role ? <span className="muted small-text"> ({found.role})</span> : null}
      </span>
    );
  }
  if (!isKey) return <span className="actor-name">{actor}</span>;
  if (!found)
    return (
      <span className="actor-name muted" title={actor}>
        API key…
      </span>
    );
  if (!found.name) {
    // A key of the organization created without a name, or one this organization does not know.
    const id = actor.slice('api-key:'.length, 'api-key:'.length + 8);
    return (
      <span className="actor-name" title={actor} data-testid="actor-name">
        {found.role
          ? `unnamed ${found.role} key ${id}${found.revoked ? ' (revoked)' : ''}`
          : `unknown key ${id}`}
      </span>
    );
  }
  return (
    <span className="actor-name" title={actor} data-testid="actor-name">
      {found.name}
      {found.role ? (
        <span className="muted small-text">
          {' '}
          ({found.role}
          {found.revoked ? ', revoked' : ''})
        </span>
      ) : null}
    </span>
  );
}
