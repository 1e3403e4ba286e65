/**
 * `herald/testing` (dist/testing.js): the suites Herald's own tests run, for a library user's slices
 * and adapters — given/when/then for deciders, the billing port's contract over an implementation, the
 * consumer-toolkit contract over a transport, the
 * message-sink contract, the fenced-handler contract over a claimed aggregate, and `waitFor` (waiting
 * on a condition with a deadline, never a sleep). Needs vitest (a peer dependency).
 */
export {
  type BillingContractFixture,
  type BillingContractHarness,
  type ContractLedgerEntry,
  describeBillingContract,
} from './testing/billing-contract.js';
export {
  type ContractConsumerOptions,
  type ContractDatabase,
  type DeadLetter,
  describeConsumerContract,
  type RawMessage,
  type TransportFixture,
} from './testing/consumer-contract.js';
export {
  type ClaimPayload,
  describeFencedHandlerContract,
  type FencedHandlerFixture,
} from './testing/fenced-handler-contract.js';
export { type Accepted, specFor } from './testing/given-when-then.js';
export { describeSinkContract, type SinkContractHarness } from './testing/sink-contract.js';
export { waitFor } from './testing/wait.js';
