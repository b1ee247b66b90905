"""TPC-H's 22 queries in gpuframe's API, written as a pandas user would write them.

Each ``qN(read)`` takes ``read(table)``, which gives a table as a frame (``gpuframe.read_parquet``
of its folder, or the pandas stand-in of ``pandas_engine``), and returns the answer as a frame,
or as a pandas frame where it ends in ``head(n)``. Columns come out in the order and under the
names of the official query's SELECT. Parameters are the spec's validation values. A scalar
subquery is a one-row aggregate crossed with the rows it filters; EXISTS and IN are semi joins,
NOT EXISTS and NOT IN anti joins; correlated subqueries are aggregates joined back on their
correlation keys.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

Read = Callable[[str], Any]


def _date(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _revenue(frame: Any) -> Any:
    return frame.l_extendedprice * (1 - frame.l_discount)


def q1(read: Read) -> Any:
    lineitem = read("lineitem")
    items = lineitem[lineitem.l_shipdate <= _date("1998-09-02")]
    items = items.assign(disc_price=_revenue(items))
    items = items.assign(charge=items.disc_price * (1 + items.l_tax))
    result = items.groupby(["l_returnflag", "l_linestatus"], as_index=False).agg(
        sum_qty=("l_quantity", "sum"),
        sum_base_price=("l_extendedprice", "sum"),
        sum_disc_price=("disc_price", "sum"),
        sum_charge=("charge", "sum"),
        avg_qty=("l_quantity", "mean"),
        avg_price=("l_extendedprice", "mean"),
        avg_disc=("l_discount", "mean"),
        count_order=("l_quantity", "size"),
    )
    return result.sort_values(["l_returnflag", "l_linestatus"])


def q2(read: Read) -> Any:
    region, nation = map(read, ("region", "nation"))
    supplier, partsupp, part = map(read, ("supplier", "partsupp", "part"))
    europe = region[region.r_name == "EUROPE"]
    suppliers = (europe.merge(nation, left_on="r_regionkey", right_on="n_regionkey")
                 .merge(supplier, left_on="n_nationkey", right_on="s_nationkey"))
    offers = partsupp.merge(suppliers, left_on="ps_suppkey", right_on="s_suppkey")
    brass = part[(part.p_size == 15) & part.p_type.str.endswith("BRASS")]
    offers = brass.merge(offers, left_on="p_partkey", right_on="ps_partkey")
    cheapest = offers.groupby("p_partkey", as_index=False).agg(
        min_cost=("ps_supplycost", "min"))
    offers = offers.merge(cheapest, on="p_partkey")
    offers = offers[offers.ps_supplycost == offers.min_cost]
    columns = ["s_acctbal", "s_name", "n_name", "p_partkey", "p_mfgr", "s_address", "s_phone",
               "s_comment"]
    return (offers[columns]
            .sort_values(["s_acctbal", "n_name", "s_name", "p_partkey"],
                         ascending=[False, True, True, True])
            .head(100))


def q3(read: Read) -> Any:
    customer, orders, lineitem = map(read, ("customer", "orders", "lineitem"))
    day = _date("1995-03-15")
    building = customer[customer.c_mktsegment == "BUILDING"]
    early = orders[orders.o_orderdate < day]
    late = lineitem[lineitem.l_shipdate > day]
    lines = (building.merge(early, left_on="c_custkey", right_on="o_custkey")
             .merge(late, left_on="o_orderkey", right_on="l_orderkey"))
    lines = lines.assign(revenue=_revenue(lines))
    result = lines.groupby(["l_orderkey", "o_orderdate", "o_shippriority"], as_index=False).agg(
        revenue=("revenue", "sum"))
    result = result[["l_orderkey", "revenue", "o_orderdate", "o_shippriority"]]
    return result.sort_values(["revenue", "o_orderdate"], ascending=[False, True]).head(10)


def q4(read: Read) -> Any:
    orders, lineitem = map(read, ("orders", "lineitem"))
    quarter = orders[(orders.o_orderdate >= _date("1993-07-01"))
                     & (orders.o_orderdate < _date("1993-10-01"))]
    late = lineitem[lineitem.l_commitdate < lineitem.l_receiptdate]
    waited = quarter.merge(late, left_on="o_orderkey", right_on="l_orderkey", how="leftsemi")
    result = waited.groupby("o_orderpriority", as_index=False).agg(
        order_count=("o_orderkey", "size"))
    return result.sort_values("o_orderpriority")


def q5(read: Read) -> Any:
    region, nation, customer = map(read, ("region", "nation", "customer"))
    orders, lineitem, supplier = map(read, ("orders", "lineitem", "supplier"))
    asia = region[region.r_name == "ASIA"]
    year = orders[(orders.o_orderdate >= _date("1994-01-01"))
                  & (orders.o_orderdate < _date("1995-01-01"))]
    lines = (asia.merge(nation, left_on="r_regionkey", right_on="n_regionkey")
             .merge(customer, left_on="n_nationkey", right_on="c_nationkey")
             .merge(year, left_on="c_custkey", right_on="o_custkey")
             .merge(lineitem, left_on="o_orderkey", right_on="l_orderkey")
             .merge(supplier, left_on=["l_suppkey", "n_nationkey"],
                    right_on=["s_suppkey", "s_nationkey"]))
    lines = lines.assign(revenue=_revenue(lines))
    result = lines.groupby("n_name", as_index=False).agg(revenue=("revenue", "sum"))
    return result.sort_values("revenue", ascending=False)


def q6(read: Read) -> Any:
    lineitem = read("lineitem")
    items = lineitem[(lineitem.l_shipdate >= _date("1994-01-01"))
                     & (lineitem.l_shipdate < _date("1995-01-01"))
                     & lineitem.l_discount.between(0.05, 0.07)
                     & (lineitem.l_quantity < 24)]
    items = items.assign(revenue=items.l_extendedprice * items.l_discount)
    return items.agg(revenue=("revenue", "sum"))


def q7(read: Read) -> Any:
    nation, supplier, customer = map(read, ("nation", "supplier", "customer"))
    orders, lineitem = map(read, ("orders", "lineitem"))
    pair = nation[nation.n_name.isin(["FRANCE", "GERMANY"])]
    suppliers = supplier.merge(pair, left_on="s_nationkey", right_on="n_nationkey").rename(
        columns={"n_name": "supp_nation"})
    customers = customer.merge(pair, left_on="c_nationkey", right_on="n_nationkey").rename(
        columns={"n_name": "cust_nation"})
    shipped = lineitem[lineitem.l_shipdate.between(_date("1995-01-01"), _date("1996-12-31"))]
    lines = (shipped.merge(suppliers[["s_suppkey", "supp_nation"]], left_on="l_suppkey",
                           right_on="s_suppkey")
             .merge(orders, left_on="l_orderkey", right_on="o_orderkey")
             .merge(customers[["c_custkey", "cust_nation"]], left_on="o_custkey",
                    right_on="c_custkey"))
    lines = lines[((lines.supp_nation == "FRANCE") & (lines.cust_nation == "GERMANY"))
                  | ((lines.supp_nation == "GERMANY") & (lines.cust_nation == "FRANCE"))]
    lines = lines.assign(l_year=lines.l_shipdate.dt.year, volume=_revenue(lines))
    result = lines.groupby(["supp_nation", "cust_nation", "l_year"], as_index=False).agg(
        revenue=("volume", "sum"))
    return result.sort_values(["supp_nation", "cust_nation", "l_year"])


def q8(read: Read) -> Any:
    part, supplier, lineitem = map(read, ("part", "supplier", "lineitem"))
    orders, customer, nation, region = map(read, ("orders", "customer", "nation", "region"))
    steel = part[part.p_type == "ECONOMY ANODIZED STEEL"]
    window = orders[orders.o_orderdate.between(_date("1995-01-01"), _date("1996-12-31"))]
    america = region[region.r_name == "AMERICA"]
    buyers = (america.merge(nation, left_on="r_regionkey", right_on="n_regionkey")
              .merge(customer, left_on="n_nationkey", right_on="c_nationkey"))
    sellers = supplier.merge(nation, left_on="s_nationkey", right_on="n_nationkey").rename(
        columns={"n_name": "nation"})
    lines = (steel.merge(lineitem, left_on="p_partkey", right_on="l_partkey")
             .merge(sellers[["s_suppkey", "nation"]], left_on="l_suppkey", right_on="s_suppkey")
             .merge(window, left_on="l_orderkey", right_on="o_orderkey")
             .merge(buyers[["c_custkey"]], left_on="o_custkey", right_on="c_custkey"))
    lines = lines.assign(o_year=lines.o_orderdate.dt.year, volume=_revenue(lines))
    lines = lines.assign(brazil=lines.volume.where(lines.nation == "BRAZIL", 0.0))
    result = lines.groupby("o_year", as_index=False).agg(
        brazil=("brazil", "sum"), volume=("volume", "sum"))
    result = result.assign(mkt_share=result.brazil / result.volume)
    return result[["o_year", "mkt_share"]].sort_values("o_year")


def q9(read: Read) -> Any:
    part, supplier, lineitem = map(read, ("part", "supplier", "lineitem"))
    partsupp, orders, nation = map(read, ("partsupp", "orders", "nation"))
    green = part[part.p_name.str.contains("green", regex=False)]
    lines = (green.merge(lineitem, left_on="p_partkey", right_on="l_partkey")
             .merge(partsupp, left_on=["l_partkey", "l_suppkey"],
                    right_on=["ps_partkey", "ps_suppkey"])
             .merge(supplier, left_on="l_suppkey", right_on="s_suppkey")
             .merge(nation, left_on="s_nationkey", right_on="n_nationkey")
             .merge(orders, left_on="l_orderkey", right_on="o_orderkey"))
    lines = lines.assign(nation=lines.n_name, o_year=lines.o_orderdate.dt.year,
                         amount=_revenue(lines) - lines.ps_supplycost * lines.l_quantity)
    result = lines.groupby(["nation", "o_year"], as_index=False).agg(
        sum_profit=("amount", "sum"))
    return result.sort_values(["nation", "o_year"], ascending=[True, False])


def q10(read: Read) -> Any:
    customer, orders, lineitem, nation = map(read, ("customer", "orders", "lineitem", "nation"))
    quarter = orders[(orders.o_orderdate >= _date("1993-10-01"))
                     & (orders.o_orderdate < _date("1994-01-01"))]
    returned = lineitem[lineitem.l_returnflag == "R"]
    lines = (quarter.merge(returned, left_on="o_orderkey", right_on="l_orderkey")
             .merge(customer, left_on="o_custkey", right_on="c_custkey")
             .merge(nation, left_on="c_nationkey", right_on="n_nationkey"))
    lines = lines.assign(revenue=_revenue(lines))
    keys = ["c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment"]
    result = lines.groupby(keys, as_index=False).agg(revenue=("revenue", "sum"))
    result = result[["c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address",
                     "c_phone", "c_comment"]]
    return result.sort_values("revenue", ascending=False).head(20)


def _german_stock(read: Read) -> Any:
    partsupp, supplier, nation = map(read, ("partsupp", "supplier", "nation"))
    germany = nation[nation.n_name == "GERMANY"]
    stock = (partsupp.merge(supplier, left_on="ps_suppkey", right_on="s_suppkey")
             .merge(germany, left_on="s_nationkey", right_on="n_nationkey"))
    return stock.assign(value=stock.ps_supplycost * stock.ps_availqty)


def q11(read: Read) -> Any:
    stock = _german_stock(read)
    total = stock.agg(total=("value", "sum"))
    parts = stock.groupby("ps_partkey", as_index=False).agg(value=("value", "sum"))
    parts = parts.merge(total, how="cross")
    parts = parts[parts.value > parts.total * 0.0001]
    return parts[["ps_partkey", "value"]].sort_values("value", ascending=False)


def q12(read: Read) -> Any:
    orders, lineitem = map(read, ("orders", "lineitem"))
    items = lineitem[lineitem.l_shipmode.isin(["MAIL", "SHIP"])
                     & (lineitem.l_commitdate < lineitem.l_receiptdate)
                     & (lineitem.l_shipdate < lineitem.l_commitdate)
                     & (lineitem.l_receiptdate >= _date("1994-01-01"))
                     & (lineitem.l_receiptdate < _date("1995-01-01"))]
    lines = items.merge(orders, left_on="l_orderkey", right_on="o_orderkey")
    high = lines.o_orderpriority.isin(["1-URGENT", "2-HIGH"])
    lines = lines.assign(high=high.astype("int64"), low=(~high).astype("int64"))
    result = lines.groupby("l_shipmode", as_index=False).agg(
        high_line_count=("high", "sum"), low_line_count=("low", "sum"))
    return result.sort_values("l_shipmode")


def q13(read: Read) -> Any:
    customer, orders = map(read, ("customer", "orders"))
    plain = orders[~orders.o_comment.str.contains("special.*requests")]
    placed = customer.merge(plain, left_on="c_custkey", right_on="o_custkey", how="left")
    counts = placed.groupby("c_custkey", as_index=False).agg(c_count=("o_orderkey", "count"))
    result = counts.groupby("c_count", as_index=False).agg(custdist=("c_custkey", "size"))
    return result.sort_values(["custdist", "c_count"], ascending=[False, False])


def q14(read: Read) -> Any:
    lineitem, part = map(read, ("lineitem", "part"))
    month = lineitem[(lineitem.l_shipdate >= _date("1995-09-01"))
                     & (lineitem.l_shipdate < _date("1995-10-01"))]
    lines = month.merge(part, left_on="l_partkey", right_on="p_partkey")
    lines = lines.assign(revenue=_revenue(lines))
    lines = lines.assign(promo=lines.revenue.where(lines.p_type.str.startswith("PROMO"), 0.0))
    totals = lines.agg(promo=("promo", "sum"), revenue=("revenue", "sum"))
    totals = totals.assign(promo_revenue=100.0 * totals.promo / totals.revenue)
    return totals[["promo_revenue"]]


def q15(read: Read) -> Any:
    lineitem, supplier = map(read, ("lineitem", "supplier"))
    quarter = lineitem[(lineitem.l_shipdate >= _date("1996-01-01"))
                       & (lineitem.l_shipdate < _date("1996-04-01"))]
    quarter = quarter.assign(revenue=_revenue(quarter))
    revenue = quarter.groupby("l_suppkey", as_index=False).agg(total_revenue=("revenue", "sum"))
    top = revenue.agg(max_revenue=("total_revenue", "max"))
    best = revenue.merge(top, how="cross")
    best = best[best.total_revenue == best.max_revenue]
    result = supplier.merge(best, left_on="s_suppkey", right_on="l_suppkey")
    return result[["s_suppkey", "s_name", "s_address", "s_phone", "total_revenue"]].sort_values(
        "s_suppkey")


def q16(read: Read) -> Any:
    partsupp, part, supplier = map(read, ("partsupp", "part", "supplier"))
    complained = supplier[supplier.s_comment.str.contains("Customer.*Complaints")]
    wanted = part[(part.p_brand != "Brand#45")
                  & ~part.p_type.str.startswith("MEDIUM POLISHED")
                  & part.p_size.isin([49, 14, 23, 45, 19, 3, 36, 9])]
    offers = (partsupp.merge(complained, left_on="ps_suppkey", right_on="s_suppkey",
                             how="leftanti")
              .merge(wanted, left_on="ps_partkey", right_on="p_partkey"))
    result = offers.groupby(["p_brand", "p_type", "p_size"], as_index=False).agg(
        supplier_cnt=("ps_suppkey", "nunique"))
    return result.sort_values(["supplier_cnt", "p_brand", "p_type", "p_size"],
                              ascending=[False, True, True, True])


def q17(read: Read) -> Any:
    lineitem, part = map(read, ("lineitem", "part"))
    boxes = part[(part.p_brand == "Brand#23") & (part.p_container == "MED BOX")]
    lines = boxes.merge(lineitem, left_on="p_partkey", right_on="l_partkey")
    usual = lines.groupby("p_partkey", as_index=False).agg(avg_quantity=("l_quantity", "mean"))
    lines = lines.merge(usual, on="p_partkey")
    small = lines[lines.l_quantity < 0.2 * lines.avg_quantity]
    total = small.agg(price=("l_extendedprice", "sum"), lines=("l_extendedprice", "count"))
    # SQL's SUM of no rows is NULL, pandas' is 0.
    average = (total.price / 7.0).where(total.lines > 0, float("nan"))
    return total.assign(avg_yearly=average)[["avg_yearly"]]


def q18(read: Read) -> Any:
    customer, orders, lineitem = map(read, ("customer", "orders", "lineitem"))
    sizes = lineitem.groupby("l_orderkey", as_index=False).agg(quantity=("l_quantity", "sum"))
    large = sizes[sizes.quantity > 300]
    result = (orders.merge(large, left_on="o_orderkey", right_on="l_orderkey")
              .merge(customer, left_on="o_custkey", right_on="c_custkey"))
    result = result[["c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice",
                     "quantity"]].rename(columns={"quantity": "sum(l_quantity)"})
    return result.sort_values(["o_totalprice", "o_orderdate"], ascending=[False, True]).head(100)


def q19(read: Read) -> Any:
    lineitem, part = map(read, ("lineitem", "part"))
    items = lineitem[lineitem.l_shipmode.isin(["AIR", "AIR REG"])
                     & (lineitem.l_shipinstruct == "DELIVER IN PERSON")]
    lines = items.merge(part, left_on="l_partkey", right_on="p_partkey")

    def kind(brand: str, containers: list[str], low: int, size: int) -> Any:
        return ((lines.p_brand == brand) & lines.p_container.isin(containers)
                & lines.l_quantity.between(low, low + 10) & lines.p_size.between(1, size))

    lines = lines[kind("Brand#12", ["SM CASE", "SM BOX", "SM PACK", "SM PKG"], 1, 5)
                  | kind("Brand#23", ["MED BAG", "MED BOX", "MED PKG", "MED PACK"], 10, 10)
                  | kind("Brand#34", ["LG CASE", "LG BOX", "LG PACK", "LG PKG"], 20, 15)]
    lines = lines.assign(revenue=_revenue(lines))
    return lines.agg(revenue=("revenue", "sum"))


def q20(read: Read) -> Any:
    supplier, nation, partsupp = map(read, ("supplier", "nation", "partsupp"))
    part, lineitem = map(read, ("part", "lineitem"))
    forest = part[part.p_name.str.startswith("forest")]
    year = lineitem[(lineitem.l_shipdate >= _date("1994-01-01"))
                    & (lineitem.l_shipdate < _date("1995-01-01"))]
    shipped = year.groupby(["l_partkey", "l_suppkey"], as_index=False).agg(
        quantity=("l_quantity", "sum"))
    stock = (partsupp.merge(forest, left_on="ps_partkey", right_on="p_partkey", how="leftsemi")
             .merge(shipped, left_on=["ps_partkey", "ps_suppkey"],
                    right_on=["l_partkey", "l_suppkey"]))
    excess = stock[stock.ps_availqty > 0.5 * stock.quantity]
    canada = nation[nation.n_name == "CANADA"]
    result = (supplier.merge(excess, left_on="s_suppkey", right_on="ps_suppkey", how="leftsemi")
              .merge(canada, left_on="s_nationkey", right_on="n_nationkey"))
    return result[["s_name", "s_address"]].sort_values("s_name")


def q21(read: Read) -> Any:
    supplier, lineitem, orders, nation = map(read, ("supplier", "lineitem", "orders", "nation"))
    late = lineitem[lineitem.l_receiptdate > lineitem.l_commitdate]
    # EXISTS another supplier on the order; NOT EXISTS another late one: the order has more than
    # one supplier, and its late lines one.
    suppliers = lineitem.groupby("l_orderkey", as_index=False).agg(
        suppliers=("l_suppkey", "nunique"))
    late_suppliers = late.groupby("l_orderkey", as_index=False).agg(
        late_suppliers=("l_suppkey", "nunique"))
    shared = suppliers[suppliers.suppliers > 1]
    alone = late_suppliers[late_suppliers.late_suppliers == 1]
    failed = orders[orders.o_orderstatus == "F"]
    saudi = nation[nation.n_name == "SAUDI ARABIA"]
    waiting = (saudi.merge(supplier, left_on="n_nationkey", right_on="s_nationkey")
               .merge(late, left_on="s_suppkey", right_on="l_suppkey")
               .merge(failed, left_on="l_orderkey", right_on="o_orderkey", how="leftsemi")
               .merge(shared, on="l_orderkey", how="leftsemi")
               .merge(alone, on="l_orderkey", how="leftsemi"))
    result = waiting.groupby("s_name", as_index=False).agg(numwait=("l_orderkey", "size"))
    return result.sort_values(["numwait", "s_name"], ascending=[False, True]).head(100)


def q22(read: Read) -> Any:
    customer, orders = map(read, ("customer", "orders"))
    codes = ["13", "31", "23", "29", "30", "18", "17"]
    customers = customer.assign(cntrycode=customer.c_phone.str.slice(0, 2))
    customers = customers[customers.cntrycode.isin(codes)]
    average = customers[customers.c_acctbal > 0.0].agg(avg_acctbal=("c_acctbal", "mean"))
    rich = customers.merge(average, how="cross")
    rich = rich[rich.c_acctbal > rich.avg_acctbal]
    idle = rich.merge(orders, left_on="c_custkey", right_on="o_custkey", how="leftanti")
    result = idle.groupby("cntrycode", as_index=False).agg(
        numcust=("c_custkey", "size"), totacctbal=("c_acctbal", "sum"))
    return result.sort_values("cntrycode")


QUERIES: dict[int, Callable[[Read], Any]] = {
    number: globals()[f"q{number}"] for number in range(1, 23)}
