/**
 * Chart.js wrappers (react-chartjs-2) with the dashboard's look: no animation, compact legend, the
 * series colors of the palette. Only the pieces used are registered, so the bundle stays small.
 */
import {
  BarElement,
  CategoryScale,
  Chart as ChartJS,
  type ChartOptions,
  Filler,
  Legend,
  LinearScale,
  LineElement,
  PointElement,
  Tooltip,
} from 'chart.js';
import { Bar, Line } from 'react-chartjs-2';

ChartJS.register(CategoryScale, LinearScale, PointElement, LineElement, BarElement, Tooltip, Legend, Filler);
ChartJS.defaults.font.family =
  'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
ChartJS.defaults.font.size = 11;
ChartJS.defaults.color = '#4b5563';

export const PALETTE = [
  '#2563eb',
  '#16a34a',
  '#d97706',
  '#dc2626',
  '#7c3aed',
  '#0891b2',
  '#db2777',
  '#4b5563',
];

export interface Series {
  label: string;
  data: (number | null)[];
  color?: string;
  /** Dashed line (a percentile next to the median). */
  dashed?: boolean;
  /** Stack bars of the same stack id. */
  stack?: string;
}

export interface ChartProps {
  labels: string[];
  series: Series[];
  /** Axis title of the y axis. */
  yLabel?: string;
  height?: number;
  /** Formats y values in ticks and tooltips. */
  formatY?: (value: number) => string;
  /** aria-label of the canvas. */
  label?: string;
  stacked?: boolean;
}

function options(props: ChartProps): ChartOptions<'line' | 'bar'> {
  const format = props.formatY;
  return {
    animation: false,
    responsive: true,
    maintainAspectRatio: false,
    interaction: { mode: 'index', intersect: false },
    plugins: {
      legend: { position: 'bottom', labels: { boxWidth: 10, boxHeight: 10, padding: 8 } },
      tooltip: format
        ? { callbacks: { label: (c) => `${c.dataset.label}: ${format(Number(c.parsed.y))}` } }
        : {},
    },
    scales: {
      x: {
        grid: { display: false },
        ticks: { maxTicksLimit: 8, maxRotation: 0 },
        stacked: props.stacked ?? false,
      },
      y: {
        beginAtZero: true,
        stacked: props.stacked ?? false,
        grid: { color: '#eef0f3' },
        title: props.yLabel ? { display: true, text: props.yLabel } : { display: false },
        ticks: format ? { callback: (v) => format(Number(v)) } : {},
      },
    },
  };
}

export function LineChart(props: ChartProps) {
  const data = {
    labels: props.labels,
    datasets: props.series.map((s, i) => {
      const color = s.color ?? PALETTE[i % PALETTE.length]!;
      return {
        label: s.label,
        data: s.data,
        borderColor: color,
        backgroundColor: `${color}22`,
        borderWidth: 1.5,
        borderDash: s.dashed ? [4, 3] : [],
        // Visible points: a minute with one sample has no line to draw.
        pointRadius: 2,
        pointHoverRadius: 4,
        tension: 0.25,
        spanGaps: true,
        fill: false,
      };
    }),
  };
  return (
    <div className="chart" style={{ height: props.height ?? 220 }}>
      <Line
        aria-label={props.label}
        role="img"
        data={data}
        options={options(props) as ChartOptions<'line'>}
      />
    </div>
  );
}

export function BarChart(props: ChartProps) {
  const data = {
    labels: props.labels,
    datasets: props.series.map((s, i) => {
      const color = s.color ?? PALETTE[i % PALETTE.length]!;
      return {
        label: s.label,
        data: s.data,
        backgroundColor: color,
        borderWidth: 0,
        ...(s.stack ? { stack: s.stack } : {}),
      };
    }),
  };
  return (
    <div className="chart" style={{ height: props.height ?? 220 }}>
      <Bar aria-label={props.label} role="img" data={data} options={options(props) as ChartOptions<'bar'>} />
    </div>
  );
}
