"""A page of a list is bounded in bytes as well as in items (selectors.LIST_PAGE_MAX_BYTES): it
ends before the item that would pass the budget, and its next page token goes on from there; a
task that alone passes the budget opens its page, without its oldest history."""

from __future__ import annotations

from a2a.types import ListTasksRequest, Message, Part, TaskState

from agents.auth import Principal
from tasks_app.selectors import LIST_PAGE_MAX_BYTES, page_within_budget, task_list
from tests.factories import task_create, task_send

ALICE = Principal(owner="key:alice")
BIG = 400_000  # characters in a large message


def messages(count: int, size: int) -> list[Message]:
    return [Message(message_id=f"m{n}", parts=[Part(text="x" * size)]) for n in range(count)]


def test_the_leading_items_that_fit_are_kept_and_the_rest_is_not_read():
    items = messages(10, 100)
    one = len(items[0].SerializeToString()) + 2  # as an element of a repeated field
    read = []

    def reading():
        for item in items:
            read.append(item)
            yield item

    kept = page_within_budget(reading(), budget=3 * one)
    assert kept == items[:3]
    assert len(read) == 4  # the fourth was read, found too big, and nothing after it


def test_the_first_item_is_kept_even_alone_over_the_budget_and_shrunk_where_it_can_be():
    first, second = messages(2, 1000)
    assert page_within_budget([first, second], budget=10) == [first]

    def shrink(item: Message, budget: int) -> Message:
        del item.parts[:]
        return item

    (shrunk,) = page_within_budget(messages(2, 1000), shrink=shrink, budget=10)
    assert list(shrunk.parts) == []


def test_a_page_of_large_tasks_ends_at_the_budget_and_its_token_goes_on(make_tenant, make_agent):
    # given 12 tasks of 400 kB each: about 4.8 MB, in a page size of 50
    agent = make_agent(make_tenant())
    sent = [str(task_send(agent, text=f"{n:02d}" + "x" * BIG).task_id) for n in range(12)]

    seen, token, pages = [], "", 0
    while True:
        page = task_list(agent=agent, principal=ALICE, request=ListTasksRequest(page_token=token))
        pages += 1
        # then each page holds whole tasks, fewer than the page size, within the budget
        assert page.page_size == 50 and page.total_size == 12
        assert 0 < len(page.tasks) < 12
        assert page.ByteSize() <= LIST_PAGE_MAX_BYTES + 1000  # the page's own fields
        assert all(len(t.history[0].parts[0].text) == BIG + 2 for t in page.tasks)
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    # and the tokens go through every task once, newest first
    assert pages > 2 and seen == sent[::-1]


def test_a_task_alone_over_the_budget_keeps_its_newest_messages_that_fit(make_tenant, make_agent):
    # given, oldest first: a task of 1 MB, a task whose two turns' messages pass the budget
    # together, and a small task
    agent = make_agent(make_tenant())
    older = task_send(agent, text="o" * 1_000_000).task_id
    big = task_create(agent, state=TaskState.TASK_STATE_INPUT_REQUIRED, text="1" * 1_200_000)
    task_send(agent, task_id=big.pk, text="2" * 1_200_000)
    small = task_send(agent, text="small").task_id

    # when listed
    first = task_list(agent=agent, principal=ALICE, request=ListTasksRequest())
    # then the page ends before the big task, which opens the next page with its newest
    # message only; the 1 MB task does not fit beside it, and follows on a page of its own
    assert [t.id for t in first.tasks] == [str(small)]
    second = task_list(
        agent=agent, principal=ALICE, request=ListTasksRequest(page_token=first.next_page_token)
    )
    (listed,) = second.tasks
    assert listed.id == str(big.pk)
    assert [m.parts[0].text[0] for m in listed.history] == ["2"]
    assert second.ByteSize() <= LIST_PAGE_MAX_BYTES + 1000
    third = task_list(
        agent=agent, principal=ALICE, request=ListTasksRequest(page_token=second.next_page_token)
    )
    assert [t.id for t in third.tasks] == [str(older)] and not third.next_page_token
    # A page size of one asks for no more than that task: it is cut the same way.
    alone = task_list(agent=agent, principal=ALICE, request=ListTasksRequest(page_size=1))
    assert len(alone.tasks[0].history) == 1
