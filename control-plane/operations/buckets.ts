// Buckets: where a site's files live.
import { z } from 'zod';
import * as buckets from '../services/buckets.ts';
import {
  Bucket,
  BucketParams,
  CreateBucketBody,
  ListByAccountQuery,
  Pagination,
  RenameBucketBody,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

export const listBuckets = defineOperation({
  name: 'list_buckets',
  description: 'List an account’s buckets, newest first',
  permission: 'READ',
  input: ListByAccountQuery,
  output: z.object({ buckets: z.array(Bucket), pagination: Pagination }),
  run: (deps, actor, input) => buckets.listBuckets(deps, actor, input.accountId, input),
});

export const createBucket = defineOperation({
  name: 'create_bucket',
  description: 'Create a bucket',
  permission: 'WRITE',
  input: CreateBucketBody,
  output: Bucket,
  run: (deps, actor, input) => buckets.createBucket(deps, actor, input),
});

export const getBucket = defineOperation({
  name: 'get_bucket',
  description: 'Get a bucket',
  permission: 'READ',
  input: BucketParams,
  output: Bucket,
  run: (deps, actor, input) => buckets.getBucket(deps, actor, input.bucketId),
});

export const updateBucket = defineOperation({
  name: 'update_bucket',
  description: 'Rename a bucket',
  permission: 'WRITE',
  input: withParams(BucketParams, RenameBucketBody),
  output: Bucket,
  run: (deps, actor, { bucketId, ...changes }) => buckets.renameBucket(deps, actor, bucketId, changes),
});
