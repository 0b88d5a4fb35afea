// The deployments' part of a start: what preview hosts keep in memory (following the change feed), the
// previews' function modules removed (they start again from their stored sources, like the workers
// that ran them), and the periodic expiry of deployments left uploading.
import { opened, type Part } from '../part.ts';
import { DeploymentExpiry } from './deployments.ts';
import { PreviewCache } from './preview-cache.ts';
import { removePreviewModules } from './previews.ts';

export const deploymentsPart: Part = {
  name: 'the deployments',
  open(deps) {
    removePreviewModules(opened(deps, 'the deployments', 'runtimeDir').runtimeDir);
    return { previews: new PreviewCache() };
  },
  listens: (deps) => [deps.previews],
  start(deps, stack) {
    stack.started('the deployments’ expiry', new DeploymentExpiry(deps));
  },
};
