/**
 * The confirmation every command goes through: what will happen, a reason when the command records one
 * (kept with the command's events), and the server's refusal shown in place if it refuses. Closes on
 * success; Escape or the dismiss button closes without doing anything. Both buttons say what they do
 * ("Keep campaign" / "Cancel campaign"), never a bare "Cancel" beside a page's red "Cancel" command.
 */
import { type ReactNode, useEffect, useId, useRef, useState } from 'react';
import { useSession } from '../api/client';
import { ErrorBanner } from './ErrorBanner';

export interface ConfirmDialogProps {
  open: boolean;
  title: string;
  description?: ReactNode;
  confirmLabel: string;
  /** The button that closes without doing anything, named by what it keeps (default "Go back"). */
  dismissLabel?: string;
  /** Ask for a reason (required, trimmed, ≤ 1000 characters) and pass it to onConfirm. */
  requireReason?: boolean;
  /** Red confirm button (cancel, skip, delete). */
  danger?: boolean;
  /** Disables the confirm button (e.g. while a form inside is invalid). */
  confirmDisabled?: boolean;
  /** Extra content between the description and the reason (a preview, a date input). */
  children?: ReactNode;
  /** Runs the command; a rejection is shown in the dialog, which stays open. */
  onConfirm(reason: string): unknown | Promise<unknown>;
  onClose(): void;
}

export function ConfirmDialog({
  open,
  title,
  description,
  confirmLabel,
  dismissLabel = 'Go back',
  requireReason = false,
  danger = false,
  confirmDisabled = false,
  children,
  onConfirm,
  onClose,
}: ConfirmDialogProps) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const titleId = useId();
  const reasonId = useId();
  const first = useRef<HTMLTextAreaElement & HTMLButtonElement>(null);
  const close = useRef(onClose);
  close.current = onClose;

  useEffect(() => {
    if (!open) return;
    setReason('');
    setError(null);
    setBusy(false);
    first.current?.focus();
    const onKey = (event: KeyboardEvent) => {
      if (event.key === 'Escape') close.current();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [open]);

  if (!open) return null;
  const trimmed = reason.trim();
  const ready =
    !busy && !confirmDisabled && (!requireReason || (trimmed.length > 0 && trimmed.length <= 1000));

  async function confirm() {
    if (!ready) return;
    setBusy(true);
    setError(null);
    try {
      await onConfirm(trimmed);
      onClose();
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  }

  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: a click beside the dialog closes it; Escape does from the keyboard
    <div
      className="modal-backdrop"
      role="presentation"
      onMouseDown={(e) => e.target === e.currentTarget && !busy && onClose()}
    >
      <div className="modal" role="dialog" aria-modal="true" aria-labelledby={titleId}>
        <h2 id={titleId}>{title}</h2>
        {description ? <div className="modal-description">{description}</div> : null}
        {children}
        {requireReason ? (
          <div className="field">
            <label htmlFor={reasonId}>Reason</label>
            <textarea
              id={reasonId}
              ref={first}
              rows={3}
              maxLength={1000}
              value={reason}
              placeholder="Why? (kept with the command)"
              onChange={(e) => setReason(e.target.value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) void confirm();
              }}
            />
          </div>
        ) : null}
        <ErrorBanner error={error} />
        <div className="modal-actions">
          <button type="button" onClick={onClose} disabled={busy}>
            {dismissLabel}
          </button>
          <button
            type="button"
            ref={requireReason ? undefined : first}
            className={danger ? 'danger' : 'primary'}
            disabled={!ready}
            onClick={() => void confirm()}
          >
            {busy ? 'Working…' : confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

export interface CommandButtonProps extends Omit<ConfirmDialogProps, 'open' | 'onClose' | 'title'> {
  /** The button's text; also the dialog's title unless `title` is given. */
  label: string;
  title?: string;
  disabled?: boolean;
  /** Smaller button for table rows. */
  small?: boolean;
}

/**
 * A command's button and its ConfirmDialog. Rendered only for roles that may issue commands: a viewer
 * sees no command buttons (the API refuses viewer commands too).
 */
export function CommandButton({ label, title, disabled, small, danger, ...dialog }: CommandButtonProps) {
  const { canCommand } = useSession();
  const [open, setOpen] = useState(false);
  if (!canCommand) return null;
  return (
    <>
      <button
        type="button"
        className={`${danger ? 'danger-outline' : ''} ${small ? 'small' : ''}`.trim() || undefined}
        disabled={disabled}
        onClick={() => setOpen(true)}
      >
        {label}
      </button>
      <ConfirmDialog
        {...dialog}
        danger={danger ?? false}
        title={title ?? label}
        open={open}
        onClose={() => setOpen(false)}
      />
    </>
  );
}

/** Renders its children only for roles that may issue commands (operator, admin). */
export function IfCanCommand({ children }: { children: ReactNode }) {
  const { canCommand } = useSession();
  return canCommand ? children : null;
}
