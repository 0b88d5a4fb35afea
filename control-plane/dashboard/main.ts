// The dashboard's shell: who is signed in, the account switcher, the navigation, sign-out, and the page
// the hash names.
import {
  chooseAccount,
  currentAccountId,
  currentSession,
  isAdmin,
  loadSession,
  signOut,
  takeReturnHash,
} from './api.ts';
import { fill, h, messageOf, run } from './dom.ts';
import { type Route, currentRoute, go, href } from './router.ts';
import * as account from './account.ts';
import * as cliLogin from './cli-login.ts';
import * as database from './database.ts';
import * as deployment from './deployment.ts';
import * as deployments from './deployments.ts';
import * as domains from './domains.ts';
import * as files from './files.ts';
import * as functions from './functions.ts';
import * as keys from './keys.ts';
import * as logs from './logs.ts';
import * as members from './members.ts';
import * as secrets from './secrets.ts';
import * as sites from './sites.ts';
import * as usage from './usage.ts';

type Page = (root: HTMLElement, route: Route) => Promise<void>;

/** The page for a route, and the navigation entry it belongs to. */
function pageFor(route: Route): { page: Page; nav: string } {
  const [first, id, sub, item] = route.segments;
  switch (first) {
    case undefined:
    case 'sites':
      if (!id) return { page: sites.renderList, nav: 'sites' };
      switch (sub) {
        case 'deployments':
          return { page: item ? deployment.render : deployments.render, nav: 'sites' };
        case 'files':
          return { page: files.render, nav: 'sites' };
        case 'functions':
          return { page: functions.render, nav: 'sites' };
        case 'logs':
          return { page: logs.render, nav: 'sites' };
        case 'secrets':
          return { page: secrets.render, nav: 'sites' };
        case 'database':
          return { page: database.render, nav: 'sites' };
        case 'domains':
          return { page: domains.render, nav: 'sites' };
        default:
          return { page: sites.renderSite, nav: 'sites' };
      }
    case 'keys':
      return { page: keys.render, nav: 'keys' };
    case 'members':
      return { page: members.render, nav: 'members' };
    case 'usage':
      return { page: usage.render, nav: 'usage' };
    case 'account':
      return { page: account.render, nav: 'account' };
    case 'cli-login':
      return { page: cliLogin.render, nav: '' };
    default:
      return { page: notFound, nav: '' };
  }
}

async function notFound(root: HTMLElement): Promise<void> {
  fill(root, h('h1', null, 'Page not found'), h('p', null, h('a', { href: href('sites') }, 'Back to your sites')));
}

let main: HTMLElement;
let nav: HTMLElement;

function navigation(active: string): HTMLElement {
  const link = (key: string, label: string, target: string) =>
    h(
      'a',
      { href: target, class: key === active ? 'active' : null, 'aria-current': key === active ? 'page' : null },
      label,
    );
  return h(
    'ul',
    null,
    h('li', null, link('sites', 'Sites', href('sites'))),
    isAdmin() ? h('li', null, link('keys', 'API keys', href('keys'))) : null,
    isAdmin() ? h('li', null, link('members', 'Members', href('members'))) : null,
    h('li', null, link('usage', 'Usage', href('usage'))),
    h('li', null, link('account', 'Password', href('account'))),
  );
}

let renders = 0;

/** Renders the page of the current hash into a fresh element, so a slow page left behind writes nowhere. */
async function render(): Promise<void> {
  const route = currentRoute();
  const { page, nav: active } = pageFor(route);
  fill(nav, navigation(active));
  const root = h('div', { class: 'page' });
  fill(main, root);
  const mine = ++renders;
  try {
    await page(root, route);
  } catch (err) {
    if (mine !== renders) return;
    fill(root, h('h1', null, 'Something went wrong'), h('p', { class: 'status error', role: 'alert' }, messageOf(err)));
  }
  if (mine === renders) {
    const heading = root.querySelector('h1');
    document.title = heading?.textContent ? `${heading.textContent} · Berth` : 'Berth';
  }
}

function accountSwitcher(): HTMLElement {
  const memberships = currentSession().user.memberships;
  const select = h(
    'select',
    { id: 'account-switch' },
    memberships.map((m) =>
      h(
        'option',
        { value: m.accountId, selected: m.accountId === currentAccountId() },
        `${m.accountName} (${m.role === 'ADMIN' ? 'admin' : 'member'})`,
      ),
    ),
  );
  select.addEventListener('change', () => {
    chooseAccount(select.value);
    // Ids in the hash belong to the previous account: start again from its sites (a CLI approval stays).
    if (currentRoute().segments[0] === 'cli-login') void render();
    else go(href('sites'));
  });
  return h('div', { class: 'account-switch' }, h('label', { for: 'account-switch' }, 'Account'), select);
}

async function start(): Promise<void> {
  const app = document.getElementById('app')!;
  let session;
  try {
    session = await loadSession();
  } catch (err) {
    fill(
      app,
      h(
        'main',
        { class: 'page' },
        h('h1', null, 'Berth'),
        h('p', { class: 'status error', role: 'alert' }, messageOf(err)),
      ),
    );
    return;
  }
  const back = takeReturnHash();
  if (back && location.hash.length <= 2) history.replaceState(null, '', back);

  const signOutButton = h('button', { type: 'button', class: 'link-button' }, 'Sign out');
  signOutButton.addEventListener('click', () => run(signOutButton, signOut));
  nav = h('nav', { class: 'main-nav', 'aria-label': 'Main' });
  main = h('main', { id: 'main' });
  fill(
    app,
    h(
      'header',
      { class: 'top' },
      h('a', { class: 'brand', href: href('sites') }, 'Berth'),
      session.user.memberships.length > 0 ? accountSwitcher() : null,
      h(
        'div',
        { class: 'user' },
        h('span', { class: 'email', title: session.user.email }, session.user.email),
        signOutButton,
      ),
      nav,
    ),
    main,
  );
  if (session.user.memberships.length === 0) {
    fill(
      main,
      h(
        'div',
        { class: 'page' },
        h('h1', null, 'No account yet'),
        h('p', null, 'You are not a member of any account. Ask an admin of an account for an invitation.'),
      ),
    );
    return;
  }
  window.addEventListener('hashchange', () => void render());
  await render();
}

void start();
