/**
 * SMS wire names (seed 003), each defined once: the default topics of submission chunks and of delivery
 * reports (both configurable: HERALD_SMS_SUBMIT_TOPIC, HERALD_SMS_DLR_TOPIC) and the reporting topic
 * the seed names for priority-5 traffic (part 2's completion notices).
 */
export const SMS_SUBMIT_TOPIC = 'sms.submit';
export const SMS_DLR_TOPIC = 'sms.dlr';
export const SMS_REPORTING_TOPIC = 'sms.reporting';
