// The few HTML pages the hosting layer writes itself: not found, and the private-site gate and refusal.

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(title: string, message: string, link?: { href: string; text: string }): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#222}h1{font-size:1.5rem}p{color:#555}</style></head>
<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>${link ? `<p><a href="${escapeHtml(link.href)}">${escapeHtml(link.text)}</a></p>` : ''}</body>
</html>
`;
}

export const noSitePage = page('Site not found', 'There is no site at this address.');
export const notFoundPage = page('Page not found', 'The page you asked for does not exist on this site.');
/** The gate of a PRIVATE site, linking to the control plane's sign-in for it. */
export const privateSitePage = (signIn: string) =>
  page('This site is private', 'Sign in with an account of this site’s owner to view it.', {
    href: signIn,
    text: 'Sign in',
  });
/**
 * A site's sign-out: a form that posts the session's anti-forgery token, so that no other page can
 * sign a visitor out (a link or an image could, were sign-out a GET).
 */
export const signOutPage = (csrf: string | null) =>
  csrf === null
    ? page('Signed out', 'You are not signed in to this site.', { href: '/', text: 'Go to the site' })
    : page('Sign out', 'Sign out of this site in this browser?').replace(
        '</body>',
        `<form method="post" action="/_berth/logout"><input type="hidden" name="csrf" value="${escapeHtml(csrf)}"><p><button type="submit">Sign out</button></p></form></body>`,
      );
export const notMemberPage = page(
  'Not your site',
  'You are signed in, but not as a member of the account that owns this site.',
  { href: '/_berth/logout', text: 'Sign out of this site' },
);
export const forbiddenPage = page(
  'Not signed out',
  'This sign-out did not come from this site’s own sign-out page: open it and use its button.',
  { href: '/_berth/logout', text: 'Sign out of this site' },
);
export const badRequestPage = page('Bad request', 'The address of this request is not valid.');
export const linkExpiredPage = page(
  'Sign in again',
  'This sign-in link was used already, has expired, or is for another site.',
);
