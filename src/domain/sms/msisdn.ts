/**
 * MSISDN normalization (seed 003, step 7: "Normalize MSISDNs"): the Bangladesh spellings the seed
 * accepts (`01712345678`, `8801712345678`, `+8801712345678`) and any international number with a `+`
 * or `00`, validated as a mobile number by libphonenumber-js (its mobile metadata), returned as E.164
 * digits without the plus (`8801712345678`, the form SMS gateways and the routing prefixes use), with
 * the number's country. Pure.
 *
 * The recipient's time zone (per-recipient send windows) defaults to its country's: `zoneForCountry`
 * knows the zone of single-zone countries and the main zone of a few others; anything else falls back
 * to the configured zone (HERALD_SMS_TIMEZONE).
 */
import { type CountryCode, parsePhoneNumberFromString } from 'libphonenumber-js/mobile';

export interface Msisdn {
  /** E.164 digits without '+', e.g. 8801712345678. */
  readonly msisdn: string;
  /** ISO 3166-1 alpha-2, e.g. BD. */
  readonly country: string;
}

/** The country national numbers are read in (seed 003: Bangladesh). */
export const DEFAULT_MSISDN_COUNTRY: CountryCode = 'BD';

/**
 * The seed's three Bangladesh spellings of a number in an operator range (01[3-9] + 8 digits): the
 * shape libphonenumber-js validates as a BD mobile number and normalizes to 880 + the last 10 digits.
 * Read without building a PhoneNumber (a CSV build normalizes a million of them; the unit tests check
 * that both paths agree); everything else goes through libphonenumber-js.
 */
const BANGLADESH_MOBILE = /^(?:\+?880|0)(1[3-9]\d{8})$/;

/** Normalizes one MSISDN; null when it is not a valid mobile number. */
export function normalizeMsisdn(
  raw: string,
  defaultCountry: CountryCode = DEFAULT_MSISDN_COUNTRY,
): Msisdn | null {
  if (defaultCountry === 'BD') {
    const fast = BANGLADESH_MOBILE.exec(raw);
    if (fast) return { msisdn: `880${fast[1]}`, country: 'BD' };
  }
  let text = raw.replace(/[\s\-().]/g, '');
  if (text.length < 6 || text.length > 20) return null;
  if (text.startsWith('00')) text = `+${text.slice(2)}`;
  // 88017…: Bangladesh's country code without the plus (the seed's second spelling).
  else if (!text.startsWith('+') && text.startsWith('880')) text = `+${text}`;
  if (!/^\+?\d+$/.test(text)) return null;
  const parsed = parsePhoneNumberFromString(text, defaultCountry);
  if (!parsed?.isValid()) return null;
  return { msisdn: parsed.number.slice(1), country: parsed.country ?? defaultCountry };
}

/** Main IANA zone of a country (countries spanning several zones map to their most populous one). */
const COUNTRY_ZONES: Readonly<Record<string, string>> = {
  BD: 'Asia/Dhaka',
  IN: 'Asia/Kolkata',
  NP: 'Asia/Kathmandu',
  PK: 'Asia/Karachi',
  LK: 'Asia/Colombo',
  MM: 'Asia/Yangon',
  TH: 'Asia/Bangkok',
  MY: 'Asia/Kuala_Lumpur',
  SG: 'Asia/Singapore',
  AE: 'Asia/Dubai',
  SA: 'Asia/Riyadh',
  QA: 'Asia/Qatar',
  KW: 'Asia/Kuwait',
  OM: 'Asia/Muscat',
  BH: 'Asia/Bahrain',
  JP: 'Asia/Tokyo',
  GB: 'Europe/London',
  GG: 'Europe/Guernsey',
  JE: 'Europe/Jersey',
  IM: 'Europe/Isle_of_Man',
  IE: 'Europe/Dublin',
  DE: 'Europe/Berlin',
  FR: 'Europe/Paris',
  IT: 'Europe/Rome',
  ES: 'Europe/Madrid',
  NL: 'Europe/Amsterdam',
  US: 'America/New_York',
  CA: 'America/Toronto',
  AU: 'Australia/Sydney',
};

export function zoneForCountry(country: string): string | null {
  return COUNTRY_ZONES[country] ?? null;
}
