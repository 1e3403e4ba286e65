// The dashboard's shared components (pages import from here).
export { ActorName } from './ActorName';
export { BarChart, type ChartProps, LineChart, PALETTE, type Series } from './Charts';
export {
  CommandButton,
  type CommandButtonProps,
  ConfirmDialog,
  type ConfirmDialogProps,
  IfCanCommand,
} from './ConfirmDialog';
export { type Column, DataTable, type DataTableProps } from './DataTable';
export { ErrorBanner, problemText } from './ErrorBanner';
export { EventHead } from './EventHead';
export { Card, Layout, PageHeader, Stat } from './Layout';
export { StatusBadge, type Tone, toneOf } from './StatusBadge';
