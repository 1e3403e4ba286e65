-- Zero-downtime upgrades (issue 24 item 4, ADR 0039): events carry the schema version of their `data`.
--
-- An expand step: a column with a constant default, so the previous release's inserts (which do not
-- name it) record version 1, which is what that release writes. PostgreSQL keeps such a default in the
-- catalogue: no table rewrite and no scan, whatever the size of the log (which is also why there is no
-- CHECK here: the writer validates the version). Readers upcast older versions to the shape the
-- decider knows (the aggregate's event schemas, src/eventstore/event-schemas.ts); a reader meeting a
-- version newer than it knows refuses it instead of folding it.
alter table event add column schema_version smallint not null default 1;
