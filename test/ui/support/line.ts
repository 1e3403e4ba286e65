/**
 * LINE campaign bodies for the browser specs: `POST /v1/campaigns` needs the content (LINE message
 * objects) and, to be scheduled or sent, an official account whose channel is registered
 * (`ui.dashboard.lineChannel`) and, for a multicast, a sealed audience (`ui.dashboard.lineAudience`).
 * Content images live on CONTENT_ORIGIN, which a page serves locally with `p.serveImages(CONTENT_ORIGIN)`.
 */
import type { LineMessage } from '../../../src/domain/campaign/line.js';

/** Where the specs' content images are (never fetched from the network: see UiPage.serveImages). */
export const CONTENT_ORIGIN = 'https://cdn.example.com';

export const text = (t: string): LineMessage => ({ type: 'text', text: t });

export const image = (name: string): LineMessage => ({
  type: 'image',
  originalContentUrl: `${CONTENT_ORIGIN}/line/${name}`,
  previewImageUrl: `${CONTENT_ORIGIN}/line/preview/${name}`,
});

/** A rich, every-kind content: text, image, video, sticker, location, a buttons template, a flex bubble. */
export const RICH_MESSAGES: LineMessage[] = [
  text('Spring sale starts now: 20% off everything in store and online until Sunday.'),
  image('spring-sale.jpg'),
  {
    type: 'template',
    altText: 'Spring sale: shop now',
    template: {
      type: 'buttons',
      thumbnailImageUrl: `${CONTENT_ORIGIN}/line/buttons.jpg`,
      title: 'Spring sale',
      text: 'Pick your store',
      actions: [
        { type: 'uri', label: 'Shop online', uri: 'https://shop.example.com/spring' },
        { type: 'postback', label: 'Remind me', data: 'remind=spring' },
      ],
    },
  },
  {
    type: 'flex',
    altText: 'Your coupon: SPRING20',
    contents: {
      type: 'bubble',
      body: {
        type: 'box',
        layout: 'vertical',
        contents: [
          { type: 'text', text: 'Your coupon', weight: 'bold', size: 'lg' },
          { type: 'text', text: 'SPRING20 — valid until Sunday', wrap: true },
        ],
      },
    },
  },
  { type: 'sticker', packageId: '446', stickerId: '1988' },
];

/** A LINE campaign body (a broadcast from `lineOaId` with one text message unless told otherwise). */
export function lineCampaign(
  name: string,
  options: {
    lineOaId?: string;
    castType?: 'broadcast' | 'multicast' | 'narrowcast';
    audienceId?: string;
    messages?: LineMessage[];
    startAt?: string;
  } = {},
): Record<string, unknown> {
  return {
    channel: 'line',
    name,
    castType: options.castType ?? 'broadcast',
    lineOaId: options.lineOaId ?? 'oa-1',
    ...(options.audienceId ? { audienceId: options.audienceId } : {}),
    line: { messages: options.messages ?? [text(`${name}: hello from Herald`)] },
    ...(options.startAt ? { startAt: options.startAt } : {}),
  };
}
