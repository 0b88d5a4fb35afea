// A site's bucket as folders: browse by path prefix, upload (picker or drag and drop, with progress),
// download, delete, and a file's versions with restore.
import { api, getAll, getBlob, objectPath, saveBlob, uploadFile } from './api.ts';
import { actionButton, badge, fill, formatBytes, h, messageOf, statusLine, table, time, uid } from './dom.ts';
import { type Route, href } from './router.ts';
import { siteFrame } from './sites.ts';
import type { FileRecord, FileVersion, FileVersionsPage, VersionDeletion, WriteFileResult } from './types.ts';

/** Types browsers do not know or get wrong (`.ts` is video/mp2t to them); text is UTF-8. */
const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  htm: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  ts: 'text/typescript; charset=utf-8',
  json: 'application/json; charset=utf-8',
  jsonl: 'application/jsonl; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  xml: 'application/xml; charset=utf-8',
  svg: 'image/svg+xml',
  sql: 'application/sql; charset=utf-8',
  webmanifest: 'application/manifest+json; charset=utf-8',
  wasm: 'application/wasm',
};

export function contentTypeFor(file: File): string {
  const ext = /\.([^./]+)$/.exec(file.name)?.[1]?.toLowerCase() ?? '';
  return TYPES[ext] ?? (file.type || 'application/octet-stream');
}

/** A folder path as the API takes it: no leading slash, one trailing slash, or empty for the top. */
export function normalizeFolder(raw: string): string {
  const trimmed = raw.trim().replace(/^\/+/, '').replace(/\/+$/, '');
  return trimmed ? `${trimmed}/` : '';
}

interface Listing {
  folders: Array<{ name: string; prefix: string; count: number }>;
  files: FileRecord[];
}

/** The folders and files directly inside `prefix`. */
export function listing(all: FileRecord[], prefix: string): Listing {
  const folders = new Map<string, number>();
  const files: FileRecord[] = [];
  for (const file of all) {
    if (!file.path.startsWith(prefix)) continue;
    const rest = file.path.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (slash === -1) files.push(file);
    else folders.set(rest.slice(0, slash), (folders.get(rest.slice(0, slash)) ?? 0) + 1);
  }
  return {
    folders: [...folders]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, count]) => ({ name, prefix: `${prefix}${name}/`, count })),
    files,
  };
}

const baseName = (path: string): string => path.slice(path.lastIndexOf('/') + 1);

export async function render(root: HTMLElement, route: Route): Promise<void> {
  const { site, body } = await siteFrame(root, route);
  const prefix = normalizeFolder(route.query.get('prefix') ?? '');
  const status = statusLine();
  const listEl = h('div', { class: 'loading' }, 'Loading files…');
  const versionsEl = h('div');
  const uploads = h('ul', { class: 'uploads', 'aria-label': 'Uploads' });

  const folderHref = (p: string) =>
    p ? href('sites', site.id, 'files', { prefix: p }) : href('sites', site.id, 'files');
  const crumbs: Array<HTMLElement | string> = [h('a', { href: folderHref('') }, 'All files')];
  let acc = '';
  for (const part of prefix.split('/').filter(Boolean)) {
    acc += `${part}/`;
    crumbs.push(' / ', h('a', { href: folderHref(acc) }, part));
  }

  const refresh = async () => {
    const all = await getAll<FileRecord, 'files'>(
      `/v0/buckets/${encodeURIComponent(site.bucketId)}/objects`,
      'files',
      prefix ? { prefix } : {},
    );
    const { folders, files } = listing(all, prefix);
    if (folders.length === 0 && files.length === 0) {
      fill(
        listEl,
        h(
          'p',
          { class: 'empty' },
          prefix
            ? 'This folder is empty.'
            : 'No files yet. Web pages go in web/ (web/index.html is the home page), functions in api/, cron jobs in cron/.',
        ),
      );
      return;
    }
    type Row = { folder: Listing['folders'][number] } | { file: FileRecord };
    const rows: Row[] = [...folders.map((folder) => ({ folder })), ...files.map((file) => ({ file }))];
    fill(
      listEl,
      table<Row>(
        'Files',
        [
          {
            label: 'Name',
            cell: (r) =>
              'folder' in r
                ? h('a', { href: folderHref(r.folder.prefix), class: 'folder' }, `${r.folder.name}/`)
                : h('span', { class: 'mono' }, baseName(r.file.path)),
          },
          {
            label: 'Size',
            cell: (r) =>
              'folder' in r ? `${r.folder.count} file${r.folder.count === 1 ? '' : 's'}` : formatBytes(r.file.bytes),
          },
          { label: 'Type', cell: (r) => ('folder' in r ? '' : h('span', { class: 'mono small' }, r.file.contentType)) },
          { label: 'Updated', cell: (r) => ('folder' in r ? '' : time(r.file.updatedAt)) },
          {
            label: 'Actions',
            class: 'actions-cell',
            cell: (r) => {
              if ('folder' in r) return '';
              const file = r.file;
              const name = baseName(file.path);
              return h(
                'div',
                { class: 'actions' },
                actionButton(
                  'Download',
                  async () => saveBlob(await getBlob(objectPath(site.bucketId, file.path)), name),
                  { status, ariaLabel: `Download ${file.path}` },
                ),
                actionButton('Versions', () => showVersions(file, versionsEl, refresh), {
                  status,
                  ariaLabel: `Versions of ${file.path}`,
                }),
                actionButton(
                  'Delete',
                  async () => {
                    if (!window.confirm(`Delete ${file.path}? Its versions are kept and can be restored.`)) return;
                    await api('DELETE', objectPath(site.bucketId, file.path));
                    status.note(`Deleted ${file.path}.`);
                    await refresh();
                  },
                  { status, class: 'danger', ariaLabel: `Delete ${file.path}` },
                ),
              );
            },
          },
        ],
        rows,
      ),
    );
  };

  // Uploading: a folder to upload into, the file picker, and the whole section as a drop zone.
  const folderId = uid();
  const folderInput = h('input', {
    id: folderId,
    value: prefix,
    class: 'mono',
    placeholder: 'web/',
    autocomplete: 'off',
    spellcheck: 'false',
  });
  const pickerId = uid();
  const picker = h('input', { id: pickerId, type: 'file', multiple: true });
  const upload = async (list: FileList | File[]) => {
    const folder = normalizeFolder(folderInput.value);
    for (const file of Array.from(list)) {
      const path = `${folder}${file.name}`;
      const bar = h('progress', { max: file.size || 1, value: 0, 'aria-label': `Uploading ${path}` });
      const note = h('span', { class: 'hint' }, 'uploading…');
      const folderLink = h('a', { href: folderHref(folder) }, path);
      uploads.append(h('li', null, h('span', { class: 'mono' }, folderLink), bar, note));
      try {
        const written = (await uploadFile(
          objectPath(site.bucketId, path),
          file,
          contentTypeFor(file),
          (loaded, total) => {
            bar.max = total;
            bar.value = loaded;
          },
        )) as WriteFileResult | null;
        bar.value = bar.max;
        const deployment = written?.deployment;
        if (deployment?.status === 'FAILED' && deployment.error) {
          note.className = 'status error';
          note.textContent = `uploaded; deployment failed at ${deployment.error.line}:${deployment.error.column}: ${deployment.error.message}`;
        } else {
          note.textContent = deployment ? `uploaded and deployed` : 'uploaded';
        }
      } catch (err) {
        note.className = 'status error';
        note.setAttribute('role', 'alert');
        note.textContent = messageOf(err);
      }
    }
    await refresh();
  };
  picker.addEventListener('change', () => {
    if (picker.files && picker.files.length > 0)
      void upload(Array.from(picker.files)).finally(() => (picker.value = ''));
  });

  const drop = h(
    'section',
    { class: 'card dropzone', 'aria-label': 'Upload files' },
    h('h2', null, 'Upload'),
    h('div', { class: 'field' }, h('label', { for: folderId }, 'Upload to folder'), folderInput),
    h('div', { class: 'field' }, h('label', { for: pickerId }, 'Choose files to upload'), picker),
    h(
      'p',
      { class: 'hint' },
      'Or drop files anywhere in this box. Files in api/ and cron/ are deployed as they are written.',
    ),
    uploads,
  );
  drop.addEventListener('dragover', (event) => {
    event.preventDefault();
    drop.classList.add('dragging');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('dragging'));
  drop.addEventListener('drop', (event) => {
    event.preventDefault();
    drop.classList.remove('dragging');
    const dropped = event.dataTransfer?.files;
    if (dropped && dropped.length > 0) void upload(Array.from(dropped));
  });

  fill(
    body,
    h('section', { class: 'card' }, h('h2', null, 'Files'), h('p', { class: 'crumbs' }, crumbs), listEl, status.el),
    versionsEl,
    drop,
  );
  await refresh();
}

async function showVersions(file: FileRecord, el: HTMLElement, refresh: () => Promise<void>): Promise<void> {
  const status = statusLine();
  const load = async () => {
    const page = await api<FileVersionsPage>('GET', `/v0/files/${encodeURIComponent(file.id)}/versions?limit=200`);
    const current = page.currentVersionId;
    fill(
      el,
      h(
        'section',
        { class: 'card', 'aria-label': `Versions of ${file.path}` },
        h('h2', null, 'Versions of ', h('span', { class: 'mono' }, file.path)),
        table<FileVersion>(
          `Versions of ${file.path}`,
          [
            { label: 'Version', cell: (v) => h('span', { class: 'mono small', title: v.id }, v.id.slice(0, 8)) },
            { label: 'Written', cell: (v) => time(v.createdAt) },
            { label: 'Size', cell: (v) => formatBytes(v.bytes) },
            { label: 'Type', cell: (v) => h('span', { class: 'mono small' }, v.contentType) },
            {
              label: 'Note',
              cell: (v) => [
                v.id === current ? badge('CURRENT', 'current') : null,
                v.restoredFromVersionId ? ` restored from ${v.restoredFromVersionId.slice(0, 8)}` : '',
              ],
            },
            {
              label: 'Actions',
              class: 'actions-cell',
              cell: (v) =>
                h(
                  'div',
                  { class: 'actions' },
                  actionButton(
                    'Download',
                    async () =>
                      saveBlob(
                        await getBlob(
                          `/v0/files/${encodeURIComponent(file.id)}/versions/${encodeURIComponent(v.id)}/content`,
                        ),
                        baseName(file.path),
                      ),
                    {
                      status,
                      ariaLabel: `Download version ${v.id.slice(0, 8)}`,
                    },
                  ),
                  v.id === current
                    ? null
                    : actionButton(
                        'Restore',
                        async () => {
                          await api('POST', `/v0/files/${encodeURIComponent(file.id)}/restore`, {
                            versionId: v.id,
                            currentVersionId: current,
                          });
                          status.note(`Restored version ${v.id.slice(0, 8)} as a new version.`);
                          await Promise.all([load(), refresh()]);
                        },
                        { status, ariaLabel: `Restore version ${v.id.slice(0, 8)}` },
                      ),
                  v.id === current
                    ? null
                    : actionButton(
                        'Delete',
                        async () => {
                          if (!window.confirm(`Delete version ${v.id.slice(0, 8)} of ${file.path} for good?`)) return;
                          const deleted = await api<VersionDeletion>(
                            'DELETE',
                            `/v0/files/${encodeURIComponent(file.id)}/versions/${encodeURIComponent(v.id)}`,
                          );
                          status.note(
                            `Deleted version ${v.id.slice(0, 8)}${deleted.freedBytes > 0 ? `, freeing ${formatBytes(deleted.freedBytes)}` : ''}.`,
                          );
                          await load();
                        },
                        { status, class: 'danger', ariaLabel: `Delete version ${v.id.slice(0, 8)}` },
                      ),
                ),
            },
          ],
          page.versions,
        ),
        status.el,
      ),
    );
  };
  await load();
  el.scrollIntoView({ block: 'nearest' });
}
