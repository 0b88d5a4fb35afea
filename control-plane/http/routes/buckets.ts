import { z } from 'zod';
import * as buckets from '../../services/buckets.ts';
import { Bucket, BucketParams, CreateBucketBody, ListByAccountQuery, Pagination, RenameBucketBody } from '../../schemas.ts';
import { defineRoute } from '../route.ts';


export const bucketRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v0/buckets',
    operationId: 'listBuckets',
    summary: 'List an account’s buckets, newest first',
    tag: 'Buckets',
    query: ListByAccountQuery,
    responses: { 200: { description: 'a page of buckets', schema: z.object({ buckets: z.array(Bucket), pagination: Pagination }) } },
    handler: ({ deps, actor, query }) => buckets.listBuckets(deps, actor, query.accountId, query),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/buckets',
    operationId: 'createBucket',
    summary: 'Create a bucket',
    tag: 'Buckets',
    body: CreateBucketBody,
    status: 201,
    responses: { 201: { description: 'the new bucket', schema: Bucket } },
    handler: ({ deps, actor, body }) => buckets.createBucket(deps, actor, body),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/buckets/:bucketId',
    operationId: 'getBucket',
    summary: 'Get a bucket',
    tag: 'Buckets',
    params: BucketParams,
    responses: { 200: { description: 'the bucket', schema: Bucket } },
    handler: ({ deps, actor, params }) => buckets.getBucket(deps, actor, params.bucketId),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/buckets/:bucketId',
    operationId: 'updateBucket',
    summary: 'Rename a bucket',
    tag: 'Buckets',
    params: BucketParams,
    body: RenameBucketBody,
    responses: { 200: { description: 'the renamed bucket', schema: Bucket } },
    handler: ({ deps, actor, params, body }) => buckets.renameBucket(deps, actor, params.bucketId, body),
  }),
];
