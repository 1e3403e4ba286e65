/**
 * `herald line-channels …` and `herald line-audiences …` (ADR 0021): the LINE directory from the command
 * line, on the same LineDirectory the API uses. Secrets are read from files (`--token-file`,
 * `--client-secret-file`), never from arguments a process list would show, and never printed;
 * `rotate-key` re-seals every channel with the current HERALD_LINE_CREDENTIALS_KEY.
 */
import { readFileSync } from 'node:fs';
import { json, ORGANIZATION_OPTION, oneShot, out, parse, UsageError } from '../../../cli/one-shot.js';
import type { Role } from '../../../registry/role.js';
import type { CampaignConfig } from '../settings.js';
import {
  LINE_AUDIENCE_UPLOAD_MAX,
  type LineChannelView,
  LineDirectory,
  newLineChannelSchema,
} from './directory.js';

const CHANNEL_USAGE =
  'herald line-channels add <line-oa-id> --organization <org> --channel-id <id> (--token-file <file> | --client-id <id> --client-secret-file <file>) | ' +
  'list [--organization <org>] [--json] | show <line-oa-id> [--json] | remove <line-oa-id> | rotate-key';

const AUDIENCE_USAGE =
  'herald line-audiences create <audience-id> --organization <org> [--name <text>] | add <audience-id> --file <user ids, one per line> | ' +
  'seal <audience-id> | show <audience-id> [--json] | list --organization <org> [--json]';

const secretFrom = (file: string) => readFileSync(file, 'utf8').trim();

function describeChannel(c: LineChannelView): string {
  const token =
    c.tokenKind === 'long_lived'
      ? 'long-lived token'
      : `short-lived tokens of client ${c.clientId}${c.issuedTokenExpiresAt ? ` (current until ${c.issuedTokenExpiresAt})` : ''}`;
  return `${c.lineOaId}  org ${c.organizationId}  channel ${c.channelId}  ${token}  sealed with key ${c.keyId}`;
}

const directoryOn = (config: CampaignConfig, db: ConstructorParameters<typeof LineDirectory>[0]['db']) =>
  new LineDirectory({ db, settings: config.line });

const lineChannelsCommand: Role<CampaignConfig>['run'] = oneShot(CHANNEL_USAGE, async (context, db) => {
  const { positionals, values } = parse(context.argv, {
    ...ORGANIZATION_OPTION,
    'channel-id': { type: 'string' },
    'token-file': { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret-file': { type: 'string' },
    json: { type: 'boolean' },
  });
  const directory = directoryOn(context.config as CampaignConfig, db);
  const [sub, lineOaId] = positionals;
  switch (sub) {
    case 'add': {
      if (!lineOaId || !values.organization || !values['channel-id']) {
        throw new UsageError('add needs <line-oa-id>, --organization and --channel-id');
      }
      const credentials = values['token-file']
        ? { channelAccessToken: secretFrom(values['token-file']) }
        : values['client-id'] && values['client-secret-file']
          ? { clientId: values['client-id'], clientSecret: secretFrom(values['client-secret-file']) }
          : undefined;
      if (!credentials)
        throw new UsageError('add needs --token-file, or --client-id and --client-secret-file');
      const input = newLineChannelSchema.safeParse({
        lineOaId,
        channelId: values['channel-id'],
        ...credentials,
      });
      if (!input.success) {
        const issue = input.error.issues[0]!;
        throw new UsageError(`${issue.path.join('.') || 'channel'}: ${issue.message}`);
      }
      out(
        `registered ${describeChannel(await directory.registerChannel({ ...input.data, organizationId: values.organization }))}`,
      );
      return 0;
    }
    case 'list': {
      const channels = await directory.listChannels(values.organization ?? null);
      out(values.json ? json(channels) : channels.map(describeChannel).join('\n') || 'no LINE channels');
      return 0;
    }
    case 'show': {
      if (!lineOaId) throw new UsageError('show needs <line-oa-id>');
      const channel = await directory.getChannel(lineOaId, values.organization ?? null);
      out(values.json ? json(channel) : describeChannel(channel));
      return 0;
    }
    case 'remove': {
      if (!lineOaId) throw new UsageError('remove needs <line-oa-id>');
      out(`removed ${describeChannel(await directory.removeChannel(lineOaId, values.organization ?? null))}`);
      return 0;
    }
    case 'rotate-key': {
      const { resealed, current } = await directory.rotateKeys();
      out(
        `re-sealed ${resealed} channel(s) with key ${(context.config as CampaignConfig).line.keyRing.current.id}; ${current} already on it`,
      );
      return 0;
    }
    default:
      throw new UsageError('expected add, list, show, remove or rotate-key');
  }
});

const lineAudiencesCommand: Role<CampaignConfig>['run'] = oneShot(AUDIENCE_USAGE, async (context, db) => {
  const { positionals, values } = parse(context.argv, {
    ...ORGANIZATION_OPTION,
    name: { type: 'string' },
    file: { type: 'string' },
    json: { type: 'boolean' },
  });
  const directory = directoryOn(context.config as CampaignConfig, db);
  const [sub, audienceId] = positionals;
  const org = values.organization ?? null;
  const describe = (a: Awaited<ReturnType<typeof directory.getAudience>>) =>
    `${a.audienceId}  org ${a.organizationId}  "${a.name}"  ${a.members} members  ${a.sealed ? `sealed ${a.sealedAt}` : 'open'}`;
  switch (sub) {
    case 'create': {
      if (!audienceId || !values.organization)
        throw new UsageError('create needs <audience-id> and --organization');
      const audience = await directory.createAudience({
        audienceId,
        organizationId: values.organization,
        name: values.name ?? audienceId,
      });
      out(`created ${describe(audience)}`);
      return 0;
    }
    case 'add': {
      if (!audienceId || !values.file) throw new UsageError('add needs <audience-id> and --file');
      const ids = readFileSync(values.file, 'utf8')
        .split(/\r?\n/)
        .map((line) => line.trim())
        .filter((line) => line.length > 0 && !line.startsWith('#'));
      if (ids.length === 0) throw new UsageError(`${values.file} holds no user ids`);
      let audience = await directory.getAudience(audienceId, org);
      for (let start = 0; start < ids.length; start += LINE_AUDIENCE_UPLOAD_MAX) {
        audience = await directory.addMembers(
          audienceId,
          ids.slice(start, start + LINE_AUDIENCE_UPLOAD_MAX),
          org,
        );
      }
      out(`added ${ids.length} user id(s): ${describe(audience)}`);
      return 0;
    }
    case 'seal': {
      if (!audienceId) throw new UsageError('seal needs <audience-id>');
      out(`sealed ${describe(await directory.sealAudience(audienceId, org))}`);
      return 0;
    }
    case 'show': {
      if (!audienceId) throw new UsageError('show needs <audience-id>');
      const audience = await directory.getAudience(audienceId, org);
      out(values.json ? json(audience) : describe(audience));
      return 0;
    }
    case 'list': {
      if (!values.organization) throw new UsageError('list needs --organization');
      const audiences = await directory.listAudiences(values.organization, null, 1000);
      out(values.json ? json(audiences) : audiences.map(describe).join('\n') || 'no audiences');
      return 0;
    }
    default:
      throw new UsageError('expected create, add, seal, show or list');
  }
});

export const lineRoles: Record<string, Role<CampaignConfig>> = {
  'line-channels': {
    summary:
      'LINE channels: add <oa> (--token-file | --client-id --client-secret-file) | list | show | remove | rotate-key',
    usage: CHANNEL_USAGE,
    run: lineChannelsCommand,
  },
  'line-audiences': {
    summary: 'LINE multicast audiences: create <id> | add <id> --file <ids> | seal <id> | show <id> | list',
    usage: AUDIENCE_USAGE,
    run: lineAudiencesCommand,
  },
};
