// Backups of a data dir and restores from them: see create.ts, restore.ts and docs/backup.md.
export { type BackupOptions, type BackupReport, createBackup } from './create.ts';
export { MIN_PASSPHRASE_LENGTH } from './key-wrap.ts';
export { BackupError, type ObjectStoreRecord, type ReplicasRecord } from './layout.ts';
export { type RestoreOptions, type RestoreReport, restoreBackup } from './restore.ts';
export { addReplicaFolder } from './replica-files.ts';
