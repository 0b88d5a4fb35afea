import * as buckets from '../../operations/buckets.ts';
import type { OperationRoute } from '../route.ts';

export const bucketRoutes: OperationRoute[] = [
  {
    operation: buckets.listBuckets,
    method: 'GET',
    path: '/v0/buckets',
    operationId: 'listBuckets',
    tag: 'Buckets',
    ok: 'a page of buckets',
  },
  {
    operation: buckets.createBucket,
    method: 'POST',
    path: '/v0/buckets',
    operationId: 'createBucket',
    tag: 'Buckets',
    status: 201,
    ok: 'the new bucket',
  },
  {
    operation: buckets.getBucket,
    method: 'GET',
    path: '/v0/buckets/:bucketId',
    operationId: 'getBucket',
    tag: 'Buckets',
    ok: 'the bucket',
  },
  {
    operation: buckets.updateBucket,
    method: 'POST',
    path: '/v0/buckets/:bucketId',
    operationId: 'updateBucket',
    tag: 'Buckets',
    ok: 'the renamed bucket',
  },
];
