/** Where a newest-first page ends: the last item's creation time and id (ties broken by id). */
export interface TimeCursor {
  readonly createdAt: string;
  readonly id: string;
}
