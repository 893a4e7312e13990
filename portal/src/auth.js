// Login: a Keycloak public client, authorization code + PKCE (oidc-client-ts). Locally the stack's dev issuer
// plays Keycloak. Tokens live in sessionStorage (gone with the tab), renewed with the refresh token.
import { UserManager, WebStorageStateStore } from 'oidc-client-ts';

export class Auth {
  /** @param {{authority: string, clientId: string, scope?: string}} config */
  constructor(config) {
    const base = new URL('./', location.href);
    base.search = '';
    base.hash = '';
    this.redirectUri = base.href;
    this.manager = new UserManager({
      authority: config.authority,
      client_id: config.clientId,
      redirect_uri: this.redirectUri,
      post_logout_redirect_uri: this.redirectUri,
      response_type: 'code',
      scope: config.scope || 'openid profile',
      userStore: new WebStorageStateStore({ store: window.sessionStorage }),
      stateStore: new WebStorageStateStore({ store: window.sessionStorage }),
      automaticSilentRenew: true,
      loadUserInfo: false,
    });
    this.user = null;
  }

  /** Completes a login redirect when the URL carries one; returns the signed-in user or null. */
  async start() {
    const params = new URLSearchParams(location.search);
    if (params.has('state') && (params.has('code') || params.has('error'))) {
      try {
        const user = await this.manager.signinRedirectCallback();
        this.user = user;
        history.replaceState(null, '', this.redirectUri + ((user.state && user.state.hash) || '#/overview'));
      } catch (err) {
        history.replaceState(null, '', this.redirectUri);
        throw err;
      }
    } else {
      const user = await this.manager.getUser();
      this.user = user && !user.expired ? user : null;
    }
    this.manager.events.addUserLoaded((u) => (this.user = u));
    this.manager.events.addUserUnloaded(() => (this.user = null));
    return this.user;
  }

  signIn() {
    return this.manager.signinRedirect({ state: { hash: location.hash || '#/overview' } });
  }

  async signOut() {
    await this.manager.signoutRedirect();
  }

  async forget() {
    await this.manager.removeUser();
    this.user = null;
  }

  async accessToken() {
    if (this.user && this.user.expired) {
      try {
        this.user = await this.manager.signinSilent();
      } catch {
        this.user = null;
      }
    }
    return this.user ? this.user.access_token : null;
  }

  /** Who is signed in: subject, name, roles and ARM scopes, from the ID token's claims (display only: the API
   *  decides what each may do). */
  get identity() {
    const p = (this.user && this.user.profile) || {};
    return {
      subject: p.sub,
      name: p.name || p.preferred_username || p.sub,
      roles: (p.realm_access && p.realm_access.roles) || [],
      scopes: Array.isArray(p.subscriptions) ? p.subscriptions : [],
    };
  }
}
